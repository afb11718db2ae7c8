package runner

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/scenario"
)

// linkPlan decides, from a case's fault schedule, which links go through
// toxiproxy: only those a fault acts on (or all, when the workload asks).
// Every other link is direct, so the harness adds no proxy hop, no copy
// and no extra failure point to what it measures.
type linkPlan struct {
	all     bool
	shared  map[string]bool         // client link of a server, or the resource
	perInst map[string]map[int]bool // server -> instances with a proxy of their own
	server  []string                // server-side links: etcd-1-peer, redis-1-repl
}

func planLinks(c *scenario.Case) linkPlan {
	p := linkPlan{all: c.Workload.ProxyAll, shared: map[string]bool{}, perInst: map[string]map[int]bool{}}
	servers := map[string]bool{links.Resource: true}
	for _, s := range c.Backend.Servers() {
		servers[s.Name] = true
	}
	for _, f := range c.Faults {
	each:
		for _, s := range f.Targets {
			t := faults.ParseTarget(s)
			if t.Kind != faults.Link {
				continue each
			}
			name := t.Name
			n, per := t.Instance()
			if t.Role() {
				// Scoped to a role (@holder): any instance may be the one.
				if p.perInst[name] == nil {
					p.perInst[name] = map[int]bool{}
				}
				for n := 1; n <= c.Workload.Instances; n++ {
					p.perInst[name][n] = true
				}
				continue each
			}
			switch {
			case per:
				if p.perInst[name] == nil {
					p.perInst[name] = map[int]bool{}
				}
				p.perInst[name][n] = true
			case servers[name]:
				p.shared[name] = true
			default:
				if !slices.Contains(p.server, name) {
					p.server = append(p.server, name)
				}
			}
		}
	}
	sort.Strings(p.server)
	return p
}

// names lists the proxied links, for run.json.
func (p linkPlan) names(c *scenario.Case) []string {
	var out []string
	if p.all {
		return []string{"every client link (proxy_all)"}
	}
	for s := range p.shared {
		out = append(out, s)
	}
	for s, insts := range p.perInst {
		for n := range insts {
			out = append(out, fmt.Sprintf("%s@instance-%d", s, n))
		}
	}
	out = append(out, p.server...)
	sort.Strings(out)
	return out
}

// routes makes the proxies instance n needs and returns how it reaches
// every server and the resource. A per-instance proxy leads to the shared
// one when both exist, so link:<server> faults still apply to everyone.
func (cr *caseRun) routes(n int, resAddr string) ([]links.Route, error) {
	p := cr.plan
	targets := cr.cl.Endpoints()
	targets[links.Resource] = resAddr
	names := make([]string, 0, len(targets))
	for name := range targets {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []links.Route
	for _, name := range names {
		r := links.Route{Name: name, Addr: targets[name]}
		if p.all || p.shared[name] {
			via, err := cr.sharedProxy(name)
			if err != nil {
				return nil, err
			}
			r.Via = via
		}
		if p.perInst[name][n] {
			up := r.Via
			if up == "" {
				up = r.Addr
			}
			px, err := cr.cl.Toxi.Proxy(fmt.Sprintf("%s@instance-%d", name, n), up)
			if err != nil {
				return nil, err
			}
			r.Via = px.Listen
		}
		out = append(out, r)
	}
	return out, nil
}

// sharedProxy returns the listen address of the shared proxy of a server's
// client link, or of the resource's.
func (cr *caseRun) sharedProxy(name string) (string, error) {
	if name != links.Resource {
		px, err := cr.cl.ClientProxy(name)
		if err != nil {
			return "", err
		}
		return px.Listen, nil
	}
	if cr.resProxy == "" {
		px, err := cr.cl.Toxi.Proxy(links.Resource, cr.res.Addr())
		if err != nil {
			return "", err
		}
		cr.resProxy = px.Listen
	}
	return cr.resProxy, nil
}

// dialAddr is the address instance n reaches server name at: the proxy it
// is routed through, or the server itself. An address-level cut between an
// instance and a server must drop packets to and from this address.
func (cr *caseRun) dialAddr(n int, name string) (cluster.Endpoint, error) {
	w := cr.workers[fmt.Sprintf("instance-%d", n)]
	if w == nil {
		return cluster.Endpoint{}, fmt.Errorf("no instance-%d", n)
	}
	for _, r := range w.routes {
		if r.Name != name {
			continue
		}
		if r.Via == "" {
			host, _, _ := strings.Cut(r.Addr, ":")
			return cluster.Endpoint{IP: host}, nil
		}
		host, port, _ := strings.Cut(r.Via, ":")
		var pn int
		fmt.Sscan(port, &pn)
		return cluster.Endpoint{IP: host, Port: pn}, nil
	}
	return cluster.Endpoint{}, fmt.Errorf("instance-%d has no route to %s", n, name)
}
