package report

import (
	"strings"

	"github.com/lockbench/lockbench/internal/history"
)

// Fault classes group faults the way an architect asks about them ("what
// happens when the holder stalls? when the leader dies?"), whatever server
// name or fault parameters a scenario used. ClassOrder is their order in
// every view.
const (
	ClassNone      = "no fault"
	ClassPause     = "pause holder"
	ClassCrash     = "crash client"
	ClassMisuse    = "client misuse"
	ClassSlow      = "slow network"
	ClassPartition = "partition"
	ClassPauseSrv  = "pause server"
	ClassKill      = "kill a member"
	ClassKillLead  = "kill leader/master"
	ClassClock     = "clock jump"
	ClassMixed     = "several faults"
)

// ClassOrder lists the fault classes in the order views show them.
var ClassOrder = []string{ClassNone, ClassPause, ClassCrash, ClassMisuse, ClassSlow, ClassPartition,
	ClassPauseSrv, ClassKill, ClassKillLead, ClassClock, ClassMixed}

// clientTarget reports whether a fault target names a worker instance
// (an application replica) rather than a server or a link.
func clientTarget(t string) bool {
	return strings.HasPrefix(t, "instance-") || t == "holder" || t == "a-waiter" || strings.HasPrefix(t, "holder-of:")
}

// faultClass classifies one scheduled fault.
func faultClass(f history.ScheduledAt) string {
	switch f.Type {
	case "pause":
		if clientTarget(f.Target) {
			return ClassPause
		}
		return ClassPauseSrv
	case "kill":
		switch {
		case clientTarget(f.Target):
			return ClassCrash
		case f.Target == "leader" || f.Target == "master":
			return ClassKillLead
		}
		return ClassKill
	case "latency", "bandwidth", "slicer", "reset-peer":
		return ClassSlow
	case "partition", "drop", "isolate", "split", "one-way":
		return ClassPartition
	case "clock-jump":
		return ClassClock
	}
	return ClassMixed
}

// FaultClass classifies a case by what it did to the lock: no fault, one
// class of fault (however many of that class), client misuse, or several.
func FaultClass(m history.CaseMeta) string {
	classes := map[string]bool{}
	for _, f := range m.Faults {
		classes[faultClass(f)] = true
	}
	if len(m.Misuse) > 0 {
		classes[ClassMisuse] = true
	}
	switch len(classes) {
	case 0:
		return ClassNone
	case 1:
		for c := range classes {
			return c
		}
	}
	return ClassMixed
}
