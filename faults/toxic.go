package faults

import (
	"context"
	"errors"
	"fmt"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/lockbench/lockbench/internal/config"
)

// Link faults drive toxiproxy through its client API. Attribute names are
// toxiproxy's own (latency, jitter, timeout); direction follows toxiproxy's
// streams: upstream is client->server, downstream is server->client.

func init() {
	Register(Info{Name: "latency", Summary: "add latency with jitter to a link (toxiproxy latency toxic)", Targets: []Kind{Link}, New: newLatency})
	Register(Info{Name: "partition", Summary: "cut a link: the proxy is disabled, new connections are refused and open ones reset", Targets: []Kind{Link}, New: newPartition})
	Register(Info{Name: "drop", Summary: "silently drop all data on a link, connections stay open (toxiproxy timeout 0)", Targets: []Kind{Link}, New: newDrop})
}

func streams(direction string) ([]string, error) {
	switch direction {
	case "", "both":
		return []string{"upstream", "downstream"}, nil
	case "upstream", "downstream":
		return []string{direction}, nil
	}
	return nil, fmt.Errorf("direction: %q is not one of both, upstream, downstream", direction)
}

// toxicFault adds one toxic per stream and removes them on heal.
type toxicFault struct {
	typ     string
	streams []string
	attrs   toxiclient.Attributes
}

func (f toxicFault) Start(ctx context.Context, env Env, target string) (Heal, error) {
	p, err := env.Link(linkName(target))
	if err != nil {
		return nil, err
	}
	var added []string
	remove := func(context.Context) error {
		var errs []error
		for _, name := range added {
			if err := p.RemoveToxic(name); err != nil {
				errs = append(errs, fmt.Errorf("remove toxic %s from %s: %w", name, p.Name, err))
			}
		}
		return errors.Join(errs...)
	}
	for _, s := range f.streams {
		name := "lockbench_" + f.typ + "_" + s
		if _, err := p.AddToxic(name, f.typ, s, 1, f.attrs); err != nil {
			return nil, errors.Join(fmt.Errorf("add %s toxic to %s: %w", f.typ, p.Name, err), remove(ctx))
		}
		added = append(added, name)
	}
	return remove, nil
}

// LatencyOptions configure the latency fault.
type LatencyOptions struct {
	Latency   config.Duration `yaml:"latency"`
	Jitter    config.Duration `yaml:"jitter"`
	Direction string          `yaml:"direction"`
}

func newLatency(decode Decoder) (Fault, error) {
	var o LatencyOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.Latency <= 0 {
		return nil, errors.New("latency: must be a positive duration")
	}
	if o.Jitter < 0 {
		return nil, errors.New("jitter: must not be negative")
	}
	s, err := streams(o.Direction)
	if err != nil {
		return nil, err
	}
	return toxicFault{typ: "latency", streams: s, attrs: toxiclient.Attributes{
		"latency": o.Latency.D().Milliseconds(), "jitter": o.Jitter.D().Milliseconds()}}, nil
}

// DropOptions configure the drop fault.
type DropOptions struct {
	Direction string `yaml:"direction"`
}

func newDrop(decode Decoder) (Fault, error) {
	var o DropOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	s, err := streams(o.Direction)
	if err != nil {
		return nil, err
	}
	return toxicFault{typ: "timeout", streams: s, attrs: toxiclient.Attributes{"timeout": 0}}, nil
}

type partition struct{}

func newPartition(decode Decoder) (Fault, error) {
	var none struct{}
	if err := decode(&none); err != nil {
		return nil, err
	}
	return partition{}, nil
}

func (partition) Start(ctx context.Context, env Env, target string) (Heal, error) {
	p, err := env.Link(linkName(target))
	if err != nil {
		return nil, err
	}
	if err := p.Disable(); err != nil {
		return nil, fmt.Errorf("disable proxy %s: %w", p.Name, err)
	}
	return func(context.Context) error {
		if err := p.Enable(); err != nil {
			return fmt.Errorf("enable proxy %s: %w", p.Name, err)
		}
		return nil
	}, nil
}
