package history

import "testing"

// TestEffectIsTheRecords: a record's effect is what it carries, whatever
// its type is called; a record written before records carried one has
// the effect its type had then, and a fault that touches no process none.
func TestEffectIsTheRecords(t *testing.T) {
	for _, tc := range []struct {
		core FaultCore
		want FaultEffect
	}{
		{FaultCore{Type: "freeze", Effect: EffectStop}, EffectStop},
		{FaultCore{Type: "pause", Effect: EffectKill}, EffectKill},
		{FaultCore{Type: "pause"}, EffectStop},
		{FaultCore{Type: "kill"}, EffectKill},
		{FaultCore{Type: "power-loss"}, EffectPowerLoss},
		{FaultCore{Type: "latency"}, EffectNone},
	} {
		if got := tc.core.EffectOf(); got != tc.want {
			t.Errorf("%+v: effect %q, want %q", tc.core, got, tc.want)
		}
	}
	if !EffectKill.Ends() || !EffectPowerLoss.Ends() || EffectStop.Ends() || EffectNone.Ends() {
		t.Error("only a kill and a power loss end their processes")
	}
}
