package verdict

import (
	"github.com/lockbench/lockbench/history"
)

// The fault classes (history.ClassOrder: the class of each fault is its
// type's own, faults.Info.Classes, recorded in the schedule).
const (
	ClassNone     = history.ClassNone
	ClassPause    = history.ClassPause
	ClassMisuse   = history.ClassMisuse
	ClassKillLead = history.ClassKillLead
	ClassMixed    = history.ClassMixed
)

// ClassOrder lists the fault classes in the order views show them.
var ClassOrder = history.ClassOrder

// ClassUnclassified is the class of a fault the schedule gave none (a
// hand-made history, or one from before classes were recorded).
const ClassUnclassified = "unclassified"

// faultClass is one scheduled fault's class, as the schedule recorded it.
func faultClass(f history.ScheduledAt) string {
	if f.Class == "" {
		return ClassUnclassified
	}
	return f.Class
}

// FaultClass classifies a case by what it did to the lock (MODEL §18): no
// fault, one class of fault (however many of that class), client misuse,
// or several.
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
