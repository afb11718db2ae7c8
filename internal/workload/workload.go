// Package workload is what the clients of a case do: how many instances
// and clients, which keys, how long they hold and think, how they retry
// and extend, and the open-loop rate. The scenario parser fills it in and
// validates it; the worker only runs it, so this package sits low, beside
// the worker, and knows no scenario, cluster or fault.
package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/pacer"
	"github.com/lockbench/lockbench/internal/resource"
)

// Workload is what the clients do. A scenario's top-level workload is the
// default of every case; a case's workload block overrides single fields.
type Workload struct {
	// Duration of the measured phase of a case.
	Duration config.Duration `yaml:"duration" json:"duration"`
	// Instances is the number of worker processes (application replicas).
	Instances int `yaml:"instances" json:"instances"`
	// Clients is the number of concurrent clients per instance.
	Clients int `yaml:"clients" json:"clients"`
	// Keys are the lock keys clients compete for.
	Keys Keys `yaml:"keys" json:"keys"`
	// Hold is how long a client works inside its critical section.
	Hold Dist `yaml:"hold" json:"hold"`
	// Think is how long a client waits between two critical sections.
	Think Dist `yaml:"think" json:"think"`
	// TTL of each lease (the lock's expiry).
	TTL config.Duration `yaml:"ttl" json:"ttl"`
	// AcquireTimeout bounds one acquisition, retries included: a client
	// never waits for a lock forever.
	AcquireTimeout config.Duration `yaml:"acquire_timeout" json:"acquire_timeout"`
	// OpTimeout bounds a release, an extension and each resource request.
	OpTimeout config.Duration `yaml:"op_timeout" json:"op_timeout"`
	// Retry is the backoff policy between attempts of one acquisition.
	Retry Retry `yaml:"retry" json:"retry"`
	// AutoExtend extends a held lease periodically, a bounded number of
	// times (every: 0 disables it).
	AutoExtend AutoExtend `yaml:"auto_extend" json:"auto_extend"`
	// AbortOnLost makes a client skip its write when its lease is reported
	// lost before the write (default true: the careful client). false
	// models work that cannot be interrupted once started.
	AbortOnLost *bool `yaml:"abort_on_lost" json:"abort_on_lost"`
	// StartAfter delays every client's first acquisition, e.g. so that a
	// fault scheduled at 0s is in effect before any lock is taken.
	StartAfter config.Duration `yaml:"start_after" json:"start_after"`
	// WrongTokenRelease is the probability (0..1) that a client, at the
	// end of its critical section, first releases its key with a wrong
	// token (the seeds' "liberação com token errado"); the backend must
	// support it (the redis family does).
	WrongTokenRelease float64 `yaml:"wrong_token_release" json:"wrong_token_release"`
	// Resource: the critical section reads and writes the protected
	// resource (default true). false measures the lock alone: no lost
	// updates or stale writes can then be seen.
	Resource *bool `yaml:"resource" json:"resource"`
	// FencingCheck is the rule the resource's fenced register applies to a
	// token: greater (default: at least the highest seen) or not-equal
	// (`token != last`, which some storage implements and which lets an
	// older holder's lower token through). See package resource.
	FencingCheck string `yaml:"fencing_check" json:"fencing_check,omitempty"`
	// ProxyAll routes every client link through toxiproxy, even those no
	// fault acts on (default false: such links are direct). For measuring
	// what the proxy costs.
	ProxyAll bool `yaml:"proxy_all" json:"proxy_all"`
	// Rate, when set, makes the load open-loop: acquisitions start on a
	// schedule over all instances, whatever became of the earlier ones;
	// an attempt that finds every client of its instance busy is dropped
	// (counted), and latency is measured from when the attempt was due.
	// Unset, the load is closed-loop: each client acquires again as soon
	// as it has released and thought.
	Rate *Rate `yaml:"rate" json:"rate,omitempty"`
	// Overrides give some instances a workload of their own ("one long
	// holder and one quick waiter"): hold, think and acquire timeout, by
	// instance number within the case (within each trial, when trials run
	// side by side). A later override wins over an earlier one.
	Overrides []Override `yaml:"overrides" json:"overrides,omitempty"`
	// Jobs, when its count is set, makes the clients run jobs through the
	// case's strategy instead of the lock loop (checker/MODEL.md §20).
	Jobs Jobs `yaml:"jobs" json:"jobs,omitzero"`
}

// Jobs is a job workload: Count one-off jobs j0 .. j<Count-1>, job n due
// n×Every after the case's start, each with one external effect applied
// to the effect sink. A client that took a job works Hold before its
// effect, the effect's transaction lasts Effect, and it works After
// before it records the job complete: the three phases a fault can meet.
type Jobs struct {
	Count  int             `yaml:"count" json:"count"`
	Every  config.Duration `yaml:"every" json:"every"`
	Effect config.Duration `yaml:"effect" json:"effect"`
	After  config.Duration `yaml:"after" json:"after"`
	// Grace is how long after a job fell due (and after the last heal)
	// the case waits before a job with no effect counts as lost.
	Grace config.Duration `yaml:"grace" json:"grace"`
	// Periodic makes the jobs one periodic job (a cron) due once per
	// period across every replica: job n is period n's run, and every
	// client fires once at each period's due time (plus its think time)
	// instead of polling for jobs not done.
	Periodic bool `yaml:"periodic" json:"periodic,omitempty"`
}

// On reports whether the workload is a job workload.
func (j Jobs) On() bool { return j.Count > 0 }

func (j Jobs) validate() []Problem {
	var p []Problem
	add := func(field, format string, args ...any) {
		p = append(p, Problem{"jobs." + field, fmt.Sprintf(format, args...)})
	}
	if j.Count < 0 || j.Count > 100_000 {
		add("count", "%d is outside 0..100000", j.Count)
	}
	if !j.On() {
		return p
	}
	if j.Every <= 0 {
		add("every", "must be a positive duration, got %s", j.Every)
	}
	if j.Effect < 0 || j.After < 0 {
		add("effect", "effect and after must not be negative")
	}
	if j.Grace <= 0 {
		add("grace", "must be a positive duration, got %s", j.Grace)
	}
	return p
}

// Override is what some instances do differently.
type Override struct {
	Instances      []int           `yaml:"instances" json:"instances"`
	Hold           *Dist           `yaml:"hold" json:"hold,omitempty"`
	Think          *Dist           `yaml:"think" json:"think,omitempty"`
	AcquireTimeout config.Duration `yaml:"acquire_timeout" json:"acquire_timeout,omitempty"`
}

// ForInstance is the workload instance n (1-based, within its trial)
// runs: w with the overrides that name n applied, and none left.
func (w Workload) ForInstance(n int) Workload {
	out := w
	out.Overrides = nil
	for _, o := range w.Overrides {
		if !slices.Contains(o.Instances, n) {
			continue
		}
		if o.Hold != nil {
			out.Hold = *o.Hold
		}
		if o.Think != nil {
			out.Think = *o.Think
		}
		if o.AcquireTimeout > 0 {
			out.AcquireTimeout = o.AcquireTimeout
		}
	}
	return out
}

// Longest is the largest of f over every instance's workload: how long the
// slowest instance may hold, or wait for a lock.
func (w Workload) Longest(f func(Workload) time.Duration) time.Duration {
	d := f(w.ForInstance(0))
	for _, o := range w.Overrides {
		for _, n := range o.Instances {
			d = max(d, f(w.ForInstance(n)))
		}
	}
	return d
}

// Rate is an open-loop schedule: a constant rate, a linear ramp over the
// case, or steps.
type Rate struct {
	PerSecond float64 `yaml:"per_second" json:"per_second,omitempty"`
	From      float64 `yaml:"from" json:"from,omitempty"`
	To        float64 `yaml:"to" json:"to,omitempty"`
	Steps     []Step  `yaml:"steps" json:"steps,omitempty"`
}

// Step is one stretch of a stepped schedule.
type Step struct {
	PerSecond float64         `yaml:"per_second" json:"per_second"`
	For       config.Duration `yaml:"for" json:"for"`
}

// Pacer returns the schedule of the whole case (all instances together).
func (r *Rate) Pacer(d time.Duration) pacer.Pacer {
	switch {
	case len(r.Steps) > 0:
		s := make(pacer.Steps, len(r.Steps))
		for i, st := range r.Steps {
			s[i] = pacer.Step{Freq: st.PerSecond, For: st.For.D()}
		}
		return s
	case r.From > 0 || r.To > 0:
		return pacer.Ramp{From: r.From, To: r.To, Duration: d}
	}
	return pacer.Constant{Freq: r.PerSecond, Duration: d}
}

// MaxRate bounds an open-loop rate (per second, the whole case), and
// MaxPlannedOps what it plans over the case's duration: what a scenario
// can make the harness write (rate: 1e18 made a 2-s case write a 375 MB
// history).
const (
	MaxRate       = 100_000
	MaxPlannedOps = 10_000_000
)

func (r *Rate) validate(d time.Duration) []Problem {
	shapes := 0
	if r.PerSecond != 0 {
		shapes++
	}
	if r.From != 0 || r.To != 0 {
		shapes++
	}
	if len(r.Steps) > 0 {
		shapes++
	}
	if shapes != 1 {
		return []Problem{{"rate", "give exactly one of per_second, from/to (a ramp) or steps"}}
	}
	peak := max(r.PerSecond, r.From, r.To)
	for _, st := range r.Steps {
		peak = max(peak, st.PerSecond)
	}
	if peak > MaxRate {
		return []Problem{{"rate", fmt.Sprintf("%g per second is more than lockbench paces (at most %d per second)", peak, MaxRate)}}
	}
	if ops := peak * d.Seconds(); ops > MaxPlannedOps {
		return []Problem{{"rate", fmt.Sprintf("%g per second for %s plans %.3g operations, each a few history lines (at most %d a case)", peak, d, ops, MaxPlannedOps)}}
	}
	if err := pacer.Validate(r.Pacer(d)); err != nil {
		return []Problem{{"rate", err.Error()}}
	}
	var total time.Duration
	for _, st := range r.Steps {
		total += st.For.D()
	}
	if total > d {
		return []Problem{{"rate.steps", fmt.Sprintf("the steps last %s, longer than the case's %s", total, d)}}
	}
	return nil
}

func joinChecks() string {
	var names []string
	for _, c := range resource.Checks {
		names = append(names, string(c))
	}
	return strings.Join(names, ", ")
}

// UsesResource reports whether the critical section touches the resource.
func (w *Workload) UsesResource() bool { return w.Resource == nil || *w.Resource }

// Keys selects lock keys.
type Keys struct {
	Count int `yaml:"count" json:"count"`
	// Pick is uniform (default), zipf (a few hot keys), sequential (each
	// client walks the keys in turn) or per-client (each client keeps one
	// key, its own while there are as many keys as clients: no contention).
	Pick string `yaml:"pick" json:"pick"`
}

// Dist is a random duration: constant (value), uniform (min..max, the
// default) or exponential (mean, capped at max when max is set).
type Dist struct {
	Dist  string          `yaml:"dist" json:"dist"`
	Value config.Duration `yaml:"value" json:"value"`
	Min   config.Duration `yaml:"min" json:"min"`
	Max   config.Duration `yaml:"max" json:"max"`
	Mean  config.Duration `yaml:"mean" json:"mean"`
}

// Retry is exponential backoff with jitter and a cap on attempts: attempt n
// waits min(max, base*2^n) scaled by a random factor in [1-jitter, 1+jitter].
type Retry struct {
	Attempts int             `yaml:"attempts" json:"attempts"`
	Base     config.Duration `yaml:"base" json:"base"`
	Max      config.Duration `yaml:"max" json:"max"`
	Jitter   float64         `yaml:"jitter" json:"jitter"`
}

// AutoExtend extends a held lease every Every, at most Max times.
type AutoExtend struct {
	Every config.Duration `yaml:"every" json:"every"`
	Max   int             `yaml:"max" json:"max"`
}

// DefaultWorkload is the workload a scenario starts from.
func Default() Workload {
	return Workload{
		Duration:       config.Duration(5 * time.Second),
		Instances:      2,
		Clients:        2,
		Keys:           Keys{Count: 1, Pick: "uniform"},
		Hold:           Dist{Dist: "uniform", Min: config.Duration(5 * time.Millisecond), Max: config.Duration(20 * time.Millisecond)},
		Think:          Dist{Dist: "uniform", Min: 0, Max: config.Duration(5 * time.Millisecond)},
		TTL:            config.Duration(time.Second),
		AcquireTimeout: config.Duration(2 * time.Second),
		OpTimeout:      config.Duration(time.Second),
		Retry:          Retry{Attempts: 100, Base: config.Duration(2 * time.Millisecond), Max: config.Duration(50 * time.Millisecond), Jitter: 0.5},
	}
}

// Problem is one thing wrong with a workload: the field (a dotted path
// such as "retry.attempts") and what is wrong with it.
type Problem struct {
	Field string
	Msg   string
}

// MaxDuration bounds a case's duration (and so every fault time).
const MaxDuration = 24 * time.Hour

// Validate returns every problem with the workload.
func (w *Workload) Validate() []Problem {
	var p []Problem
	add := func(field, format string, args ...any) { p = append(p, Problem{field, fmt.Sprintf(format, args...)}) }
	pos := func(name string, d config.Duration) {
		if d <= 0 {
			add(name, "must be a positive duration, got %s", d)
		}
	}
	pos("duration", w.Duration)
	if w.Duration.D() > MaxDuration {
		add("duration", "%s is longer than the %s a case may last", w.Duration, MaxDuration)
	}
	pos("ttl", w.TTL)
	pos("acquire_timeout", w.AcquireTimeout)
	pos("op_timeout", w.OpTimeout)
	if w.Instances < 1 || w.Instances > 64 {
		add("instances", "%d is outside 1..64", w.Instances)
	}
	if w.Clients < 1 || w.Clients > 256 {
		add("clients", "%d is outside 1..256", w.Clients)
	}
	if w.Keys.Count < 1 || w.Keys.Count > 1_000_000 {
		add("keys.count", "%d is outside 1..1000000", w.Keys.Count)
	}
	switch w.Keys.Pick {
	case "", "uniform", "zipf", "sequential", "per-client":
	default:
		add("keys.pick", "%q is not one of uniform, zipf, sequential, per-client", w.Keys.Pick)
	}
	p = append(p, w.Hold.validate("hold")...)
	p = append(p, w.Think.validate("think")...)
	if w.Retry.Attempts < 1 {
		add("retry.attempts", "%d must be at least 1", w.Retry.Attempts)
	}
	if w.Retry.Base < 0 || w.Retry.Max < w.Retry.Base {
		add("retry", "need 0 <= base <= max")
	}
	if w.Retry.Jitter < 0 || w.Retry.Jitter > 1 {
		add("retry.jitter", "%v is outside 0..1", w.Retry.Jitter)
	}
	if w.AutoExtend.Every < 0 || w.AutoExtend.Max < 0 {
		add("auto_extend", "every and max must not be negative")
	}
	if w.StartAfter < 0 || w.StartAfter >= w.Duration {
		add("start_after", "%s must be at least 0 and shorter than duration %s", w.StartAfter, w.Duration)
	}
	if w.WrongTokenRelease < 0 || w.WrongTokenRelease > 1 {
		add("wrong_token_release", "%v is outside 0..1", w.WrongTokenRelease)
	}
	if w.AutoExtend.Every > 0 && w.AutoExtend.Every >= w.TTL {
		add("auto_extend.every", "%s must be shorter than ttl %s", w.AutoExtend.Every, w.TTL)
	}
	if w.Rate != nil {
		p = append(p, w.Rate.validate(w.Duration.D())...)
	}
	p = append(p, w.Jobs.validate()...)
	if w.Jobs.On() {
		if w.Rate != nil {
			add("jobs", "a job workload is closed-loop: no rate")
		}
		if last := w.Jobs.Every.D()*time.Duration(w.Jobs.Count-1) + w.Jobs.Grace.D(); last >= w.Duration.D() {
			add("jobs", "the last job falls due at %s and needs its grace %s: longer than duration %s", w.Jobs.Every.D()*time.Duration(w.Jobs.Count-1), w.Jobs.Grace, w.Duration)
		}
	}
	if w.FencingCheck != "" {
		switch {
		case !slices.Contains(resource.Checks, resource.Check(w.FencingCheck)):
			add("fencing_check", "%q is not one of %s", w.FencingCheck, joinChecks())
		case !w.UsesResource():
			add("fencing_check", "the workload has no resource (resource: false) to check tokens")
		}
	}
	for i, o := range w.Overrides {
		f := fmt.Sprintf("overrides[%d]", i)
		if len(o.Instances) == 0 {
			add(f+".instances", "names no instance")
		}
		for _, n := range o.Instances {
			if n < 1 || n > w.Instances {
				add(f+".instances", "instance %d is outside 1..%d", n, w.Instances)
			}
		}
		if o.Hold == nil && o.Think == nil && o.AcquireTimeout == 0 {
			add(f, "overrides nothing (hold, think or acquire_timeout)")
		}
		if o.Hold != nil {
			p = append(p, o.Hold.validate(f+".hold")...)
		}
		if o.Think != nil {
			p = append(p, o.Think.validate(f+".think")...)
		}
		if o.AcquireTimeout < 0 {
			add(f+".acquire_timeout", "must be a positive duration, got %s", o.AcquireTimeout)
		}
	}
	return p
}

func (d Dist) validate(name string) []Problem {
	var p []Problem
	switch d.Dist {
	case "constant":
		if d.Value < 0 {
			p = append(p, Problem{name + ".value", "must not be negative"})
		}
	case "", "uniform":
		if d.Min < 0 || d.Max < d.Min {
			p = append(p, Problem{name, fmt.Sprintf("need 0 <= min <= max, got min %s max %s", d.Min, d.Max)})
		}
	case "exponential":
		if d.Mean <= 0 {
			p = append(p, Problem{name + ".mean", "must be a positive duration"})
		}
	default:
		p = append(p, Problem{name + ".dist", fmt.Sprintf("%q is not one of constant, uniform, exponential", d.Dist)})
	}
	return p
}

// Range is how far apart two draws of d can be: max - min, an
// exponential's mean (for a range it has none of).
func (d Dist) Range() time.Duration {
	switch d.Dist {
	case "constant":
		return 0
	case "exponential":
		return d.Mean.D()
	}
	return max(0, d.Max.D()-d.Min.D())
}

// Chance says what chance decides in what the clients do: whether any
// instance's hold varies, the widest range of a think over the instances,
// and whether keys are picked at random among several. A fault at a fixed
// instant meets a workload chance moves at a point of chance anyway;
// against one it barely moves (constant holds, a few ms of think) the
// instant is the author's, aimed at one particular moment.
func (w Workload) Chance() (holdsVary bool, think time.Duration, randomKeys bool) {
	holdsVary, think = w.Hold.Range() > 0, w.Think.Range()
	for _, o := range w.Overrides {
		if o.Hold != nil && o.Hold.Range() > 0 {
			holdsVary = true
		}
		if o.Think != nil {
			think = max(think, o.Think.Range())
		}
	}
	switch w.Keys.Pick {
	case "", "uniform", "zipf":
		randomKeys = w.Keys.Count > 1
	}
	return holdsVary, think, randomKeys
}

// Draw returns one sample of d.
func (d Dist) Draw(r *rand.Rand) time.Duration {
	switch d.Dist {
	case "constant":
		return d.Value.D()
	case "exponential":
		v := time.Duration(r.ExpFloat64() * float64(d.Mean))
		if d.Max > 0 && v > d.Max.D() {
			v = d.Max.D()
		}
		return v
	default:
		if d.Max <= d.Min {
			return d.Min.D()
		}
		return d.Min.D() + time.Duration(r.Int64N(int64(d.Max-d.Min)+1))
	}
}

// Backoff returns the wait before retry attempt n (0-based).
func (rt Retry) Backoff(n int, r *rand.Rand) time.Duration {
	b := float64(rt.Base) * math.Pow(2, float64(n))
	if b > float64(rt.Max) {
		b = float64(rt.Max)
	}
	f := 1 + rt.Jitter*(2*r.Float64()-1)
	return time.Duration(b * f)
}

// KeyPicker chooses keys for one client.
type KeyPicker struct {
	keys Keys
	r    *rand.Rand
	zipf *rand.Zipf
	next int
	// Offset is added to every key's number: the keys of a side-by-side
	// trial (a lane) are its own.
	Offset int
}

// NewKeyPicker returns a picker drawing from r; start (the client's index
// over all instances) offsets sequential picking so that clients do not
// all begin on the same key, and is the key of a per-client picker.
func NewKeyPicker(k Keys, r *rand.Rand, start int) *KeyPicker {
	p := &KeyPicker{keys: k, r: r, next: start}
	if k.Pick == "zipf" && k.Count > 1 {
		p.zipf = rand.NewZipf(r, 1.1, 1, uint64(k.Count-1))
	}
	return p
}

// Next returns the next key name, "k0".."k<count-1>".
func (p *KeyPicker) Next() string {
	var i int
	switch {
	case p.keys.Count == 1:
		i = 0
	case p.keys.Pick == "per-client":
		i = p.next % p.keys.Count
	case p.zipf != nil:
		i = int(p.zipf.Uint64())
	case p.keys.Pick == "sequential":
		i = p.next % p.keys.Count
		p.next++
	default:
		i = p.r.IntN(p.keys.Count)
	}
	return Key(i + p.Offset)
}

// Key is the name of the lock key numbered i (0-based): "k0", "k1", ...
// Keys are written here and read by ParseKey, nowhere else.
func Key(i int) string { return "k" + strconv.Itoa(i) }

// ParseKey reads a key's name ("k3") as Key writes it.
func ParseKey(s string) (int, bool) {
	d, ok := strings.CutPrefix(s, "k")
	n, err := strconv.Atoi(d)
	if !ok || err != nil || n < 0 || strconv.Itoa(n) != d {
		return 0, false
	}
	return n, true
}

// Upper returns the longest duration d can draw (an uncapped exponential
// has none: it returns a long one, eight means).
func (d Dist) Upper() time.Duration {
	switch d.Dist {
	case "constant":
		return d.Value.D()
	case "exponential":
		if d.Max > 0 {
			return d.Max.D()
		}
		return 8 * d.Mean.D()
	default:
		if d.Max < d.Min {
			return d.Min.D()
		}
		return d.Max.D()
	}
}
