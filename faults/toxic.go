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
	Register(Info{Name: "bandwidth", Summary: "limit a link to a rate in KB/s (toxiproxy bandwidth toxic)", Targets: []Kind{Link}, New: newBandwidth})
	Register(Info{Name: "slicer", Summary: "slice data into small delayed packets (toxiproxy slicer toxic)", Targets: []Kind{Link}, New: newSlicer})
	Register(Info{Name: "reset-peer", Summary: "reset connections with a TCP RST after a timeout (toxiproxy reset_peer toxic)", Targets: []Kind{Link}, New: newResetPeer})
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

// BandwidthOptions configure the bandwidth fault.
type BandwidthOptions struct {
	Rate      int    `yaml:"rate"` // KB/s
	Direction string `yaml:"direction"`
}

func newBandwidth(decode Decoder) (Fault, error) {
	var o BandwidthOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.Rate <= 0 {
		return nil, errors.New("rate: must be a positive number of KB/s")
	}
	s, err := streams(o.Direction)
	if err != nil {
		return nil, err
	}
	return toxicFault{typ: "bandwidth", streams: s, attrs: toxiclient.Attributes{"rate": o.Rate}}, nil
}

// SlicerOptions configure the slicer fault.
type SlicerOptions struct {
	AverageSize   int             `yaml:"average_size"`   // bytes
	SizeVariation int             `yaml:"size_variation"` // bytes
	Delay         config.Duration `yaml:"delay"`          // between slices
	Direction     string          `yaml:"direction"`
}

func newSlicer(decode Decoder) (Fault, error) {
	var o SlicerOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.AverageSize <= 0 || o.SizeVariation < 0 || o.SizeVariation >= o.AverageSize || o.Delay < 0 {
		return nil, errors.New("need average_size > size_variation >= 0 and delay >= 0")
	}
	s, err := streams(o.Direction)
	if err != nil {
		return nil, err
	}
	return toxicFault{typ: "slicer", streams: s, attrs: toxiclient.Attributes{
		"average_size": o.AverageSize, "size_variation": o.SizeVariation, "delay": o.Delay.D().Microseconds()}}, nil
}

// ResetPeerOptions configure the reset-peer fault.
type ResetPeerOptions struct {
	After     config.Duration `yaml:"after"` // reset this long after data starts flowing (0: at once)
	Direction string          `yaml:"direction"`
}

func newResetPeer(decode Decoder) (Fault, error) {
	var o ResetPeerOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.After < 0 {
		return nil, errors.New("after: must not be negative")
	}
	s, err := streams(o.Direction)
	if err != nil {
		return nil, err
	}
	return toxicFault{typ: "reset_peer", streams: s, attrs: toxiclient.Attributes{"timeout": o.After.D().Milliseconds()}}, nil
}
