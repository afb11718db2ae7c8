package faults

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
)

// netem: latency, jitter and loss on what a host sends, below TCP, with
// tc netem in the host's own namespace (network: hosts). Unlike a toxic,
// it acts on every protocol and on links between members (ZooKeeper's
// quorum, etcd's Raft, Consul's gossip), and the server on the other side
// sees the real thing. `to` limits it to some peers.
func init() {
	Register(Info{Name: "netem",
		Example:  Example{Backend: "etcd", Network: "hosts", Fault: "{type: netem, delay: 10ms, target: etcd-1}"},
		Does:     "tc netem on what the target sends (to `to`, or everyone): `delay`, `jitter`, `loss`",
		Observed: "packets went through the netem queue; refused at validation on a kernel without netem (this machine's)",
		Action:   ActShape, Options: NetemOptions{}, Classes: map[Kind]string{Server: history.ClassSlow, Instance: history.ClassSlow}, Summary: "delay, jitter and loss on what a server or instance sends, to `to` or everyone (tc netem; network: hosts)",
		Targets: []Kind{Server, Instance}, NeedsHosts: true, NeedsNetem: true, New: newNetem})
}

// NetemOptions configure the netem fault.
type NetemOptions struct {
	Delay  config.Duration `yaml:"delay" doc:"delay added to every packet"`
	Jitter config.Duration `yaml:"jitter" doc:"jitter around the delay"`
	Loss   float64         `yaml:"loss" doc:"percent of the packets dropped"` // percent
	To     []string        `yaml:"to" doc:"servers or instances the shaping applies to (default: everyone)"`
}

type netem struct {
	o  NetemOptions
	to []Target // o.To, parsed
}

func newNetem(decode Decoder) (Fault, error) {
	var o NetemOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	switch {
	case o.Delay < 0 || o.Jitter < 0:
		return nil, errors.New("delay and jitter must not be negative")
	case o.Loss < 0 || o.Loss > 100:
		return nil, fmt.Errorf("loss: %v is not a percentage", o.Loss)
	case o.Delay == 0 && o.Loss == 0:
		return nil, errors.New("give a delay, a loss, or both")
	case o.Jitter > o.Delay:
		return nil, errors.New("jitter: must not exceed the delay")
	}
	f := netem{o: o}
	for _, n := range o.To {
		f.to = append(f.to, ParseTarget(n))
	}
	return f, nil
}

func (f netem) Names() []string { return f.o.To }

func (f netem) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	sh, ok := env.(Shaper)
	if !ok {
		return nil, errors.New("netem needs every server and instance on a host of its own (network: hosts)")
	}
	c, err := sh.Shape(target, f.to, Netem{Delay: f.o.Delay.D(), Jitter: f.o.Jitter.D(), Loss: f.o.Loss})
	if err != nil {
		return nil, err
	}
	return &Effect{
		Seen: fmt.Sprintf("netem delay %s jitter %s loss %.1f%% on what %s sends", f.o.Delay.D(), f.o.Jitter.D(), f.o.Loss, target),
		Check: func(ctx context.Context) (string, error) {
			return observeRules(ctx, []Cut{c}, func(n int64) (string, error) {
				if n == 0 {
					return "", errors.New("no packet went through the netem queue: nothing crossed the shaped link")
				}
				return fmt.Sprintf("%d packet(s) went through the netem queue", n), nil
			})
		},
		Heal: func(context.Context) (string, error) { return "", c.Undo() },
	}, nil
}
