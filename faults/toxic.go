package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/links"
)

// Link faults drive toxiproxy through its client API. Attribute names are
// toxiproxy's own (latency, jitter, timeout); direction follows toxiproxy's
// streams: upstream is client->server, downstream is server->client.
//
// A link fault is observed on the traffic of the instances it targets (see
// package links): a partition or a drop must leave them without answers,
// latency must make answers late, a reset must break connections. A link
// that nobody used while the fault was in force is a fault that did
// nothing: the case is invalid, saying so.

func init() {
	Register(Info{Name: "latency",
		Example:  Example{Backend: "redis", Fault: "{type: latency, latency: 10ms, target: link:redis-1}"},
		Does:     "toxiproxy latency toxic; options `latency`, `jitter`, `direction` (both, upstream = client→server, downstream)",
		Observed: "the toxics are listed on the proxy, and the answers its clients got were at least half the latency late",
		Options:  LatencyOptions{}, Classes: map[Kind]string{Link: history.ClassSlow}, Summary: "add latency with jitter to a link (toxiproxy latency toxic)", Targets: []Kind{Link}, New: newLatency})
	Register(Info{Name: "partition",
		Example:  Example{Backend: "redis", Fault: "{type: partition, target: link:redis-1}"},
		Does:     "proxy disabled: new connections refused, open ones reset",
		Observed: "a dial to the proxy is refused, and its clients tried and got no answer",
		Classes:  map[Kind]string{Link: history.ClassPartition}, Summary: "cut a link: the proxy is disabled, new connections are refused and open ones reset", Targets: []Kind{Link}, New: newPartition})
	Register(Info{Name: "drop",
		Example:  Example{Backend: "redis", Fault: "{type: drop, target: link:redis-1}"},
		Does:     "toxiproxy `timeout` 0: data silently dropped, connections stay open; `direction`",
		Observed: "its clients tried and got no answer",
		Options:  DropOptions{}, Classes: map[Kind]string{Link: history.ClassPartition}, Summary: "silently drop all data on a link, connections stay open (toxiproxy timeout 0)", Targets: []Kind{Link}, New: newDrop})
	Register(Info{Name: "bandwidth",
		Example:  Example{Backend: "redis", Fault: "{type: bandwidth, rate: 10, target: link:redis-1}"},
		Does:     "toxiproxy bandwidth toxic; `rate` KB/s, `direction`",
		Observed: "traffic crossed the limited link",
		Options:  BandwidthOptions{}, Classes: map[Kind]string{Link: history.ClassSlow}, Summary: "limit a link to a rate in KB/s (toxiproxy bandwidth toxic)", Targets: []Kind{Link}, New: newBandwidth})
	Register(Info{Name: "slicer",
		Example:  Example{Backend: "redis", Fault: "{type: slicer, average_size: 10, size_variation: 2, delay: 1ms, target: link:redis-1}"},
		Does:     "toxiproxy slicer toxic; `average_size`, `size_variation` (bytes), `delay`, `direction`",
		Observed: "traffic crossed the sliced link",
		Options:  SlicerOptions{}, Classes: map[Kind]string{Link: history.ClassSlow}, Summary: "slice data into small delayed packets (toxiproxy slicer toxic)", Targets: []Kind{Link}, New: newSlicer})
	Register(Info{Name: "reset-peer",
		Example:  Example{Backend: "redis", Fault: "{type: reset-peer, target: link:redis-1}"},
		Does:     "toxiproxy reset_peer toxic: TCP RST `after` a delay; `direction`",
		Observed: "its clients' connections failed",
		Options:  ResetPeerOptions{}, Classes: map[Kind]string{Link: history.ClassSlow}, Summary: "reset connections with a TCP RST after a timeout (toxiproxy reset_peer toxic)", Targets: []Kind{Link}, New: newResetPeer})
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

// settle is how long after a link fault begins its answers start to
// count: answers already on their way when it began may still arrive.
// Attempts count from the first instant: a dial the fault refused, or a
// request it swallowed, right as it began is its effect (MODEL §10).
const settle = 200 * time.Millisecond

// linkWatch measures a link's traffic while a fault is in force.
type linkWatch struct {
	env   Env
	link  Target
	mu    sync.Mutex
	start links.Counts // at the fault's start: attempts count from here
	base  links.Counts // once it settled: answers count from here
	done  chan struct{}
	once  sync.Once
	judge func(d links.Counts) (string, error)
}

// watchLink takes the link's counters now, and again once the fault has
// settled; check judges what crossed the link since.
func watchLink(ctx context.Context, env Env, target Target, judge func(d links.Counts) (string, error)) (*linkWatch, error) {
	w := &linkWatch{env: env, link: target, done: make(chan struct{}), judge: judge}
	b, err := env.Traffic(ctx, w.link)
	if err != nil {
		return nil, err
	}
	w.start, w.base = b, b
	go func() {
		select {
		case <-time.After(settle):
		case <-w.done:
			return
		}
		if b, err := env.Traffic(ctx, w.link); err == nil {
			w.mu.Lock()
			w.base = b
			w.mu.Unlock()
		}
	}()
	return w, nil
}

// stop ends the watch's settling; idempotent.
func (w *linkWatch) stop() {
	w.once.Do(func() { close(w.done) })
}

func (w *linkWatch) check(ctx context.Context) (string, error) {
	w.stop()
	cur, err := w.env.Traffic(ctx, w.link)
	if err != nil {
		return "", err
	}
	w.mu.Lock()
	d, settled := cur.Sub(w.start), cur.Sub(w.base)
	w.mu.Unlock()
	// What was tried counts from the first instant; what came back, once
	// the answers already under way had arrived.
	d.BytesIn, d.Responses = settled.BytesIn, settled.Responses
	if d.Attempts() == 0 {
		return "", &IdleError{fmt.Sprintf("nothing used %s while the fault was in force: the clients it targets do not route through it, or were idle", w.link)}
	}
	return w.judge(d)
}

// noAnswers judges a partition or a drop: clients tried, nothing came back.
func noAnswers(d links.Counts) (string, error) {
	if d.BytesIn > 0 {
		return "", fmt.Errorf("clients kept receiving through it (%d bytes, %d answers)", d.BytesIn, d.Answers())
	}
	return fmt.Sprintf("clients tried %d time(s) (%d dials, %d refused, %d bytes sent, %d connection(s) cut) and got no answer",
		d.Dials+d.DialErrors+boolInt(d.BytesOut > 0)+d.Errors+d.Closed, d.Dials, d.DialErrors, d.BytesOut, d.Errors+d.Closed), nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// toxicFault adds one toxic per stream and removes them on heal.
type toxicFault struct {
	typ     string
	streams []string
	attrs   toxiclient.Attributes
	judge   func(d links.Counts) (string, error)
}

func (f toxicFault) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	p, err := env.Link(target)
	if err != nil {
		return nil, err
	}
	// Counted from before the toxics go in: what they do from their first
	// instant is their effect.
	w, err := watchLink(ctx, env, target, f.judge)
	if err != nil {
		return nil, err
	}
	var added []string
	remove := func() error {
		w.stop()
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
			return nil, errors.Join(fmt.Errorf("add %s toxic to %s: %w", f.typ, p.Name, err), remove())
		}
		added = append(added, name)
	}
	// Read the toxics back: they are what toxiproxy applies.
	live, err := p.Toxics()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("read toxics of %s: %w", p.Name, err), remove())
	}
	var names []string
	for _, t := range live {
		if strings.HasPrefix(t.Name, "lockbench_"+f.typ) {
			names = append(names, t.Stream)
		}
	}
	if len(names) != len(f.streams) {
		return nil, errors.Join(fmt.Errorf("toxiproxy lists %d %s toxic(s) on %s, want %d", len(names), f.typ, p.Name, len(f.streams)), remove())
	}
	return &Effect{
		Seen:  fmt.Sprintf("toxiproxy applies %s on %s (%s)", f.typ, target, strings.Join(names, ", ")),
		Check: w.check,
		Heal:  func(context.Context) (string, error) { return "", remove() },
	}, nil
}

// LatencyOptions configure the latency fault.
type LatencyOptions struct {
	Latency   config.Duration `yaml:"latency" doc:"latency added to the link"`
	Jitter    config.Duration `yaml:"jitter" doc:"jitter around the latency"`
	Direction string          `yaml:"direction" doc:"both (default), upstream (client to server) or downstream"`
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
	lat := o.Latency.D()
	judge := func(d links.Counts) (string, error) {
		if d.Answers() == 0 {
			return "no answer came back while it was in force: slower than the clients waited", nil
		}
		// Bucket edges are coarse (1-2-5), so half the latency is the
		// least an answer that crossed the toxic can show.
		if got := d.SlowestAtLeast(); got < lat/2 {
			return "", fmt.Errorf("%d answers came back, the slowest in under %s: the %s latency did not reach them", d.Answers(), nextEdge(got), lat)
		}
		return fmt.Sprintf("%d answers, the slowest at least %s late", d.Answers(), d.SlowestAtLeast()), nil
	}
	return toxicFault{typ: "latency", streams: s, judge: judge, attrs: toxiclient.Attributes{
		"latency": o.Latency.D().Milliseconds(), "jitter": o.Jitter.D().Milliseconds()}}, nil
}

// DropOptions configure the drop fault.
type DropOptions struct {
	Direction string `yaml:"direction" doc:"both (default), upstream (client to server) or downstream"`
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
	return toxicFault{typ: "timeout", streams: s, judge: noAnswers, attrs: toxiclient.Attributes{"timeout": 0}}, nil
}

type partition struct{}

func newPartition(decode Decoder) (Fault, error) {
	var none struct{}
	if err := decode(&none); err != nil {
		return nil, err
	}
	return partition{}, nil
}

func (partition) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	p, err := env.Link(target)
	if err != nil {
		return nil, err
	}
	// Counted from before the proxy goes down: the connections it resets
	// as it does are its first effect.
	w, err := watchLink(ctx, env, target, noAnswers)
	if err != nil {
		return nil, err
	}
	if err := p.Disable(); err != nil {
		w.stop()
		return nil, fmt.Errorf("disable proxy %s: %w", p.Name, err)
	}
	enable := func(context.Context) (string, error) {
		if err := p.Enable(); err != nil {
			return "", fmt.Errorf("enable proxy %s: %w", p.Name, err)
		}
		return "", nil
	}
	// The proxy no longer listens: a dial must be refused.
	c, err := net.DialTimeout("tcp", p.Listen, time.Second)
	if err == nil {
		c.Close()
		w.stop()
		_, herr := enable(ctx)
		return nil, errors.Join(fmt.Errorf("proxy %s disabled, but %s still accepts connections", p.Name, p.Listen), herr)
	}
	return &Effect{Seen: fmt.Sprintf("proxy %s refuses connections", p.Name), Check: w.check, Heal: enable}, nil
}

// BandwidthOptions configure the bandwidth fault.
type BandwidthOptions struct {
	Rate      int    `yaml:"rate" doc:"KB/s the link carries"` // KB/s
	Direction string `yaml:"direction" doc:"both (default), upstream (client to server) or downstream"`
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
	return toxicFault{typ: "bandwidth", streams: s, judge: flowed, attrs: toxiclient.Attributes{"rate": o.Rate}}, nil
}

// SlicerOptions configure the slicer fault.
type SlicerOptions struct {
	AverageSize   int             `yaml:"average_size" doc:"average slice, bytes"`          // bytes
	SizeVariation int             `yaml:"size_variation" doc:"variation of a slice, bytes"` // bytes
	Delay         config.Duration `yaml:"delay" doc:"delay between slices"`                 // between slices
	Direction     string          `yaml:"direction" doc:"both (default), upstream (client to server) or downstream"`
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
	return toxicFault{typ: "slicer", streams: s, judge: flowed, attrs: toxiclient.Attributes{
		"average_size": o.AverageSize, "size_variation": o.SizeVariation, "delay": o.Delay.D().Microseconds()}}, nil
}

// ResetPeerOptions configure the reset-peer fault.
type ResetPeerOptions struct {
	After     config.Duration `yaml:"after" doc:"reset this long after data starts flowing (0: at once)"` // reset this long after data starts flowing (0: at once)
	Direction string          `yaml:"direction" doc:"both (default), upstream (client to server) or downstream"`
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
	judge := func(d links.Counts) (string, error) {
		if n := d.Errors + d.DialErrors; n > 0 {
			return fmt.Sprintf("%d connection error(s) (resets, refused dials)", n), nil
		}
		return "", fmt.Errorf("no connection of the clients it targets was reset")
	}
	return toxicFault{typ: "reset_peer", streams: s, judge: judge, attrs: toxiclient.Attributes{"timeout": o.After.D().Milliseconds()}}, nil
}

// flowed judges a toxic that shapes traffic without stopping it: traffic
// crossed the link while it was in force.
func flowed(d links.Counts) (string, error) {
	if d.BytesIn+d.BytesOut == 0 {
		return "", fmt.Errorf("no byte crossed it")
	}
	return fmt.Sprintf("%d bytes crossed the shaped link (%d answers)", d.BytesIn+d.BytesOut, d.Answers()), nil
}

// nextEdge is the upper edge of the bucket whose lower edge is d.
func nextEdge(d time.Duration) time.Duration {
	for _, e := range links.Edges {
		if e > d {
			return e
		}
	}
	return d
}
