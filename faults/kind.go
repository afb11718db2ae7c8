package faults

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ServerKind is a server kind as the faults see it: its name and what its
// registration (internal/cluster's Kind) declares a fault may do to its
// servers. It travels as data (Env.Server): faults never import the
// cluster, and no fault asks which kind a server is, only what it can do.
type ServerKind struct {
	Name string
	Abilities
}

// Abilities are what a server kind lets faults do beyond what every
// process allows (stop it, kill it, cut it, slow its links), declared by
// the kind's registration.
type Abilities struct {
	// Clock is how a fault moves the servers' wall clock (required:
	// ClockNone when it cannot).
	Clock Clock
	// Speaks is the protocol a fault talks to the servers in to act on
	// them or to observe them (their clock, their memory, a promotion);
	// "" for none of the faults' protocols.
	Speaks Protocol
	// Memory: the servers hold their data in a memory of a bounded size
	// that a fault can fill (memory-pressure).
	Memory bool
	// Promote: a standby of the kind can be made the primary by a fault
	// (promote).
	Promote bool
}

// Clock is how a fault moves a kind's wall clock.
type Clock string

// The clocks.
const (
	// ClockNone: out of every fault's reach (Go servers read the wall
	// clock through the vDSO, out of libfaketime's; ZooKeeper times its
	// sessions on the monotonic clock).
	ClockNone Clock = "none"
	// ClockFaketime: moved for real, libfaketime preloaded into the
	// server (the case starts it so when a fault moves its clock).
	ClockFaketime Clock = "faketime"
	// ClockData: emulated through the servers' data: every live lock's
	// expiry is moved by what the clock would have moved.
	ClockData Clock = "data"
)

// Protocol is a protocol the faults speak to a server.
type Protocol string

// The protocols the faults speak.
const (
	ProtoRedis    Protocol = "redis"
	ProtoPostgres Protocol = "postgres"
)

// Ability is what a fault asks of its target server's kind (Info.Asks).
type Ability string

// The abilities a fault may ask.
const (
	AskClock   Ability = "clock"   // a clock a fault can move (Abilities.Clock not ClockNone)
	AskMemory  Ability = "memory"  // Abilities.Memory
	AskPromote Ability = "promote" // Abilities.Promote
)

// Can reports whether servers of the kind allow a fault that asks a ("":
// every kind does).
func (a Abilities) Can(ask Ability) bool {
	switch ask {
	case "":
		return true
	case AskClock:
		return a.Clock == ClockFaketime || a.Clock == ClockData
	case AskMemory:
		return a.Memory
	case AskPromote:
		return a.Promote
	}
	return false
}

// Faketime reports whether the fault needs servers of a kind with
// abilities a to run under libfaketime: it moves their clock, for real.
func (i Info) Faketime(a Abilities) bool { return i.Asks == AskClock && a.Clock == ClockFaketime }

// ActsOn lists, of kinds, those the fault acts on (nil: a fault that asks
// nothing of a kind acts on every one).
func (i Info) ActsOn(kinds []ServerKind) []string {
	if i.Asks == "" {
		return nil
	}
	var out []string
	for _, k := range kinds {
		if k.Can(i.Asks) {
			out = append(out, k.Name)
		}
	}
	return out
}

// Check says what the faults cannot do of what the abilities declare (a
// clock moved for real that no fault can read in the protocol the kind
// speaks, a memory no fault can fill in it), naming where to add it: a
// kind's declaration is held to what the faults implement.
func (a Abilities) Check() error {
	var errs []error
	switch a.Clock {
	case ClockNone:
	case ClockFaketime:
		if clockReaders[a.Speaks] == nil {
			errs = append(errs, fmt.Errorf("clock %s: no fault can read the clock of a server speaking %q (faults/clock.go's clockReaders has %s)", a.Clock, a.Speaks, protocols(clockReaders)))
		}
	case ClockData:
		if dataClocks[a.Speaks] == nil {
			errs = append(errs, fmt.Errorf("clock %s: no fault can move the expiries of a server speaking %q (faults/clock.go's dataClocks has %s)", a.Clock, a.Speaks, protocols(dataClocks)))
		}
	case "":
		errs = append(errs, errors.New("clock: undeclared (faults.ClockNone, ClockFaketime or ClockData)"))
	default:
		errs = append(errs, fmt.Errorf("clock: %q is not a clock (none, faketime, data)", a.Clock))
	}
	if a.Memory && a.Speaks != ProtoRedis {
		errs = append(errs, fmt.Errorf("memory: memory-pressure fills a server through the %s protocol only, not %q (faults/memory.go)", ProtoRedis, a.Speaks))
	}
	if a.Promote && a.Speaks != ProtoPostgres {
		errs = append(errs, fmt.Errorf("promote: promote speaks the %s protocol only, not %q (faults/promote.go)", ProtoPostgres, a.Speaks))
	}
	return errors.Join(errs...)
}

func protocols[V any](m map[Protocol]V) string {
	var out []string
	for p := range m {
		out = append(out, string(p))
	}
	if len(out) == 0 {
		return "none"
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
