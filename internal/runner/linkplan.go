package runner

import (
	"slices"
	"sort"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/scenario"
)

// linkPlan decides, from a case's fault schedule, which links go through
// toxiproxy: only those a fault acts on (or all, when the workload asks).
// Every other link is direct, so the harness adds no proxy hop, no copy
// and no extra failure point to what it measures.
type linkPlan struct {
	all     bool
	shared  map[string]bool                      // client link of a server, or the resource
	perInst map[string]map[history.Instance]bool // server -> instances with a proxy of their own
	server  []string                             // server-side links: etcd-1-peer, redis-1-repl
}

func planLinks(c *scenario.Case) linkPlan {
	p := linkPlan{all: c.Workload.ProxyAll, shared: map[string]bool{}, perInst: map[string]map[history.Instance]bool{}}
	servers := map[string]bool{links.Resource: true}
	for _, s := range c.Servers() {
		servers[s.Name] = true
	}
	instance := func(name string, n history.Instance) {
		if p.perInst[name] == nil {
			p.perInst[name] = map[history.Instance]bool{}
		}
		p.perInst[name][n] = true
	}
	for _, f := range c.Faults {
		for _, t := range f.Targets {
			switch {
			case t.Kind != faults.Link:
			case t.IsRole():
				// Scoped to a role (@holder): any instance may be the one.
				for n := history.Instance(1); n <= history.Instance(c.Workload.Instances); n++ {
					instance(t.Name, n)
				}
			case t.Instance != 0:
				instance(t.Name, t.Instance)
			case servers[t.Name]:
				p.shared[t.Name] = true
			default:
				if !slices.Contains(p.server, t.Name) {
					p.server = append(p.server, t.Name)
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
			out = append(out, faults.LinkTarget(s, n).Link())
		}
	}
	out = append(out, p.server...)
	sort.Strings(out)
	return out
}

// routes makes the proxies instance n needs and returns how it reaches
// every server and the resource. A per-instance proxy leads to the shared
// one when both exist, so link:<server> faults still apply to everyone.
func (cr *caseRun) routes(n history.Instance, resAddr string) ([]links.Route, error) {
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
			px, err := cr.cl.Toxi.Proxy(faults.LinkTarget(name, n).Link(), up)
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
