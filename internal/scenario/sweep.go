package scenario

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/config"
	"go.yaml.in/yaml/v3"
)

// Sweeps. A case may vary up to MaxSweeps of its values over a list: any
// value written as {sweep: [a, b, c]} (a duration, a latency, a share, a
// client count, a backend option), and a duration written as
// {ttl_x: [0.5, 0.9, 1.1, 2, 4]}, multiples of the case's TTL (a pause
// "a bit shorter than the lease" on every backend alike: the case's lease,
// such as a Consul session's TTL, or its ttl for a backend without one).
// Optionally
// {sweep: [...], name: pause} labels the axis; the default label is the
// field's own name ("for", "latency"). The case is expanded into one point
// per combination, named <case>[<label>=<value>,…], each a row of its own
// (two sweeps with the same name are one axis, their values taken in step:
// a pause's length and the case's duration, say),
// (its trials are judged together); every point's meta records its
// values, so that reports group points by their case and plot them
// against their magnitude.

// MaxSweeps bounds the axes of one case: beyond two, points multiply past
// what a report can show (and a run can afford).
const MaxSweeps = 2

// MaxPoints bounds the points of one case.
const MaxPoints = 100

// sweepAxis is one swept value of a case.
type sweepAxis struct {
	label  string
	parent *yaml.Node // the mapping that holds the value
	index  int        // of the value node in parent.Content
	values []*yaml.Node
	ttlX   []float64 // multiples of the TTL, for ttl_x
	line   int
	path   string
}

// Point is one combination of a case's swept values.
type Point struct {
	// Labels and Values are the axes and their values as written
	// ("for", "1.1×lease"); X is each value as a number (seconds for a
	// duration, the multiple for ttl_x) for plots.
	Labels []string
	Values []string
	X      []float64
}

// findSweeps walks a case's YAML and returns its sweep axes.
func findSweeps(errs *Errors, where string, n *yaml.Node) []*sweepAxis {
	var out []*sweepAxis
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for k := 0; k+1 < len(n.Content); k += 2 {
				key, val := n.Content[k].Value, n.Content[k+1]
				p := key
				if path != "" {
					p = path + "." + key
				}
				if ax, ok := sweepOf(errs, where+"."+p, key, val); ok {
					if ax != nil {
						ax.parent, ax.index, ax.path = n, k+1, p
						out = append(out, ax)
					}
					continue
				}
				walk(val, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(n, "")
	return out
}

// sweepOf reports whether val is a sweep (ok), and returns its axis, or
// nil with the problem recorded.
func sweepOf(errs *Errors, field, key string, val *yaml.Node) (*sweepAxis, bool) {
	if val.Kind != yaml.MappingNode {
		return nil, false
	}
	var list *yaml.Node
	ttl := false
	ax := &sweepAxis{label: key, line: val.Line}
	for k := 0; k+1 < len(val.Content); k += 2 {
		switch val.Content[k].Value {
		case "sweep":
			list = val.Content[k+1]
		case "ttl_x":
			list, ttl = val.Content[k+1], true
		case "name":
			ax.label = val.Content[k+1].Value
		default:
			if list == nil && k == 0 {
				return nil, false // an ordinary mapping (a distribution, options)
			}
			errs.add(val.Content[k].Line, field, "a sweep takes sweep (or ttl_x) and name, not %q", val.Content[k].Value)
			return nil, true
		}
	}
	if list == nil {
		return nil, false
	}
	if list.Kind != yaml.SequenceNode || len(list.Content) < 2 {
		errs.add(list.Line, field, "a sweep needs a list of at least two values")
		return nil, true
	}
	ax.values = list.Content
	if ttl {
		for _, v := range list.Content {
			x, err := strconv.ParseFloat(v.Value, 64)
			if err != nil || x <= 0 || math.IsInf(x, 0) {
				errs.add(v.Line, field+".ttl_x", "%q is not a positive multiple of the TTL", v.Value)
				return nil, true
			}
			ax.ttlX = append(ax.ttlX, x)
		}
	}
	return ax, true
}

// expandSweeps returns the case's points: a copy of its YAML per
// combination of swept values, with the point each stands for; a case
// without sweeps is its one point. ttl gives the case's TTL for a point
// (ttl_x values are multiples of it).
func expandSweeps(errs *Errors, where string, n *yaml.Node, ttl func(*yaml.Node) (time.Duration, bool)) ([]*yaml.Node, []*Point) {
	found := findSweeps(errs, where, n)
	if len(found) == 0 {
		return []*yaml.Node{n}, []*Point{nil}
	}
	// Sweeps of the same name go in step: one axis.
	var axes []*sweepAxis
	var steps [][]*sweepAxis
	for _, ax := range found {
		joined := false
		for i, a := range axes {
			if a.label == ax.label {
				if len(ax.values) != len(a.values) {
					errs.add(ax.line, where+"."+ax.path, "sweeps named %q go in step, so they need as many values (%d here, %d at %s)", ax.label, len(ax.values), len(a.values), a.path)
					return nil, nil
				}
				steps[i] = append(steps[i], ax)
				joined = true
			}
		}
		if !joined {
			axes = append(axes, ax)
			steps = append(steps, []*sweepAxis{ax})
		}
	}
	if len(axes) > MaxSweeps {
		errs.add(axes[MaxSweeps].line, where+"."+axes[MaxSweeps].path, "a case sweeps at most %d values (it sweeps %d)", MaxSweeps, len(axes))
		return nil, nil
	}
	total := 1
	for _, ax := range axes {
		total *= len(ax.values)
	}
	if total > MaxPoints {
		errs.add(axes[0].line, where, "the sweeps make %d points (at most %d)", total, MaxPoints)
		return nil, nil
	}
	var nodes []*yaml.Node
	var points []*Point
	idx := make([]int, len(axes))
	for {
		p := &Point{}
		for a, ax := range axes {
			for _, st := range steps[a] {
				v := st.values[idx[a]]
				scalar := &yaml.Node{Kind: v.Kind, Tag: v.Tag, Value: v.Value, Line: v.Line, Content: v.Content}
				if st.ttlX != nil {
					scalar = &yaml.Node{Kind: yaml.ScalarNode, Value: "1s", Line: v.Line} // replaced below
				}
				st.parent.Content[st.index] = scalar
			}
			v := ax.values[idx[a]]
			p.Labels = append(p.Labels, ax.label)
			p.Values = append(p.Values, v.Value)
			x, ok := numeric(v)
			if !ok {
				x = float64(idx[a]) // a name: its place in the list
			}
			p.X = append(p.X, x)
		}
		cp := deepCopy(n)
		if d, ok := ttl(cp); ok {
			// ttl_x: now that the point's TTL is known, set the durations.
			for a := range axes {
				named := false // an axis is named by its first ttl_x sweep
				for _, st := range steps[a] {
					if st.ttlX == nil {
						continue
					}
					x := st.ttlX[idx[a]]
					dur := time.Duration(math.Round(x * float64(d)))
					replaceAt(cp, n, st, &yaml.Node{Kind: yaml.ScalarNode, Value: dur.String(), Line: st.values[idx[a]].Line})
					if !named {
						p.Values[a] = strconv.FormatFloat(x, 'f', -1, 64) + "×lease"
						p.X[a] = x
						named = true
					}
				}
			}
		}
		nodes = append(nodes, cp)
		points = append(points, p)
		// next combination
		a := len(axes) - 1
		for ; a >= 0; a-- {
			idx[a]++
			if idx[a] < len(axes[a].values) {
				break
			}
			idx[a] = 0
		}
		if a < 0 {
			break
		}
	}
	return nodes, points
}

// name is how a point extends its case's name: [for=1.1×lease,clients=8].
func (p *Point) name() string {
	var parts []string
	for i := range p.Labels {
		parts = append(parts, p.Labels[i]+"="+p.Values[i])
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// numeric is a swept value as a number for plots: a duration in seconds,
// a number as itself; false otherwise (a backend name).
func numeric(v *yaml.Node) (float64, bool) {
	if f, err := strconv.ParseFloat(strings.TrimSuffix(v.Value, "%"), 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
		return f, true
	}
	var d config.Duration
	if err := v.Decode(&d); err == nil {
		return d.D().Seconds(), true
	}
	return 0, false
}

func deepCopy(n *yaml.Node) *yaml.Node {
	cp := *n
	cp.Content = make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		cp.Content[i] = deepCopy(c)
	}
	return &cp
}

// replaceAt puts v at ax's place in cp, a copy of orig.
func replaceAt(cp, orig *yaml.Node, ax *sweepAxis, v *yaml.Node) {
	var find func(c, o *yaml.Node) bool
	find = func(c, o *yaml.Node) bool {
		if o == ax.parent {
			c.Content[ax.index] = v
			return true
		}
		for i := range o.Content {
			if i < len(c.Content) && find(c.Content[i], o.Content[i]) {
				return true
			}
		}
		return false
	}
	find(cp, orig)
}
