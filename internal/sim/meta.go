package sim

import (
	"slices"
	"strconv"
)

// FaultSpec is a scheduled fault as the case meta lists it (MODEL §2).
type FaultSpec struct {
	Name   string
	Type   string
	Target string // as written: "holder", "instance-2", "srv-1", "link:srv-1@instance-1", ...
	At     int64  // from the case start
	For    int64
	Group  string // declared group (MODEL §10), "" for none
	Class  string // its class for the decision view (MODEL §18), "" for none
	Lane   int    // the lane it belongs to (MODEL §14), 0 for none
}

// Expect is a case's expectation as written (MODEL §13): nil pointers are
// unset and take the defaults.
type Expect struct {
	Violations       *bool
	StaleAccepted    *bool
	LostUpdates      *bool
	Available        *bool
	MaxGapNs         int64
	RecoversWithinNs int64
	MinGapNs         int64
	Measure          bool
	Note             string
	// Any: the outcomes left to any (MODEL §13), by their JSON names.
	Any []string
	// What tells a client's bug from its control (MODEL §6, §13): the
	// service's answers linearizable, late calls accepted, the longest
	// overlap (0: not bounded).
	Linearizable           *bool
	LateReleasesAccepted   *bool
	LateExtensionsAccepted *bool
	MaxOverlapNs           int64
}

// isAny reports whether the expectation leaves the outcome to any.
func (e *Expect) isAny(name string) bool { return slices.Contains(e.Any, name) }

// SweepPoint is meta.sweep: the point of a swept case a row stands for
// (MODEL §17).
type SweepPoint struct {
	Case   string
	Labels []string
	Values []string
	X      []float64
}

// CaseMeta is the case-start mark's meta.
type CaseMeta struct {
	Name       string
	Backend    string
	Fenced     bool
	DurationNs int64
	Expect     Expect
	Faults     []FaultSpec
	Clients    int
	Keys       int
	LeaseNs    int64
	// LeaseRenewed: a library renews the lease unseen (MODEL §6: no
	// zombie by the lease alone).
	LeaseRenewed bool
	// ExpiryBoundNs: the longest the service may keep a dead or silent
	// holder's grant (MODEL §2, §11).
	ExpiryBoundNs int64
	OpTimeoutNs   int64
	Row           string
	Trial         int
	Trials        int
	Need          int
	Misuse        []string
	Control       bool
	Thresholds    []string
	// Lanes side by side (MODEL §14): Lanes lanes of LaneInstances
	// instances and Keys keys each.
	Lanes         int
	LaneInstances int
	Sweep         *SweepPoint
}

func (m *CaseMeta) encode() []byte {
	o := newObj(nil)
	o.Str("name", m.Name)
	o.Str("backend", m.Backend)
	o.Bool("fenced", m.Fenced)
	o.Int("duration_ns", m.DurationNs)
	o.Raw("expect", m.Expect.encode())
	if len(m.Faults) > 0 {
		b := []byte{'['}
		for i, f := range m.Faults {
			if i > 0 {
				b = append(b, ',')
			}
			fo := newObj(b)
			fo.Str("name", f.Name).Str("type", f.Type).Str("target", f.Target).Int("at_ns", f.At).Int("for_ns", f.For)
			if f.Group != "" {
				fo.Str("group", f.Group)
			}
			if f.Class != "" {
				fo.Str("class", f.Class)
			}
			if f.Lane != 0 {
				fo.Int("lane", int64(f.Lane))
			}
			b = fo.End()
		}
		b = append(b, ']')
		o.Raw("faults", b)
	}
	o.Int("clients", int64(m.Clients))
	o.Int("keys", int64(m.Keys))
	if m.LeaseNs != 0 {
		o.Int("lease_ns", m.LeaseNs)
	}
	if m.LeaseRenewed {
		o.Bool("lease_renewed", true)
	}
	if m.ExpiryBoundNs != 0 {
		o.Int("expiry_bound_ns", m.ExpiryBoundNs)
	}
	if m.OpTimeoutNs != 0 {
		o.Int("op_timeout_ns", m.OpTimeoutNs)
	}
	if m.Row != "" {
		o.Str("row", m.Row)
	}
	if m.Trial != 0 {
		o.Int("trial", int64(m.Trial))
	}
	if m.Trials != 0 {
		o.Int("trials", int64(m.Trials))
	}
	if m.Need != 0 {
		o.Int("need", int64(m.Need))
	}
	if len(m.Misuse) > 0 {
		o.Raw("misuse", appendStrings(nil, m.Misuse))
	}
	if m.Control {
		o.Bool("control", true)
	}
	if len(m.Thresholds) > 0 {
		o.Raw("thresholds", appendStrings(nil, m.Thresholds))
	}
	if m.Lanes > 0 {
		o.Int("lanes", int64(m.Lanes))
		o.Int("lane_instances", int64(m.LaneInstances))
	}
	if sw := m.Sweep; sw != nil {
		so := newObj(nil)
		so.Str("case", sw.Case)
		so.Raw("labels", appendStrings(nil, sw.Labels))
		so.Raw("values", appendStrings(nil, sw.Values))
		xb := []byte{'['}
		for i, x := range sw.X {
			if i > 0 {
				xb = append(xb, ',')
			}
			xb = strconv.AppendFloat(xb, x, 'f', -1, 64)
		}
		so.Raw("x", append(xb, ']'))
		o.Raw("sweep", so.End())
	}
	return o.End()
}

func (e *Expect) encode() []byte {
	o := newObj(nil)
	if e.Violations != nil {
		o.Bool("violations", *e.Violations)
	}
	if e.StaleAccepted != nil {
		o.Bool("stale_writes_accepted", *e.StaleAccepted)
	}
	if e.LostUpdates != nil {
		o.Bool("lost_updates", *e.LostUpdates)
	}
	if e.Available != nil {
		o.Bool("available", *e.Available)
	}
	if e.MaxGapNs != 0 {
		o.Int("max_gap_ns", e.MaxGapNs)
	}
	if e.RecoversWithinNs != 0 {
		o.Int("recovers_within_ns", e.RecoversWithinNs)
	}
	if e.MinGapNs != 0 {
		o.Int("min_gap_ns", e.MinGapNs)
	}
	if e.Linearizable != nil {
		o.Bool("linearizable", *e.Linearizable)
	}
	if e.LateReleasesAccepted != nil {
		o.Bool("late_releases_accepted", *e.LateReleasesAccepted)
	}
	if e.LateExtensionsAccepted != nil {
		o.Bool("late_extensions_accepted", *e.LateExtensionsAccepted)
	}
	if e.MaxOverlapNs != 0 {
		o.Int("max_overlap_ns", e.MaxOverlapNs)
	}
	if e.Measure {
		o.Bool("measure", true)
	}
	if len(e.Any) > 0 {
		o.Raw("any", appendStrings(nil, e.Any))
	}
	if e.Note != "" {
		o.Str("note", e.Note)
	}
	return o.End()
}

// HarnessStats is the harness mark's meta (MODEL §12).
type HarnessStats struct {
	BadLines       int
	EmitLagMaxNs   int64
	CoordinatorCPU float64
	WorkersCPU     float64
	Cores          int
}

func (h *HarnessStats) encode() []byte {
	o := newObj(nil)
	o.Int("bad_lines", int64(h.BadLines))
	o.Int("worker_emit_lag_max_ns", h.EmitLagMaxNs)
	o.Float("coordinator_cpu_cores", h.CoordinatorCPU)
	o.Float("workers_cpu_cores", h.WorkersCPU)
	o.Int("cores", int64(h.Cores))
	o.Int("coordinator_goroutines", 40)
	o.Int("coordinator_fds", 30)
	o.Int("coordinator_heap_bytes", 8<<20)
	return o.End()
}

func bp(b bool) *bool { return &b }
