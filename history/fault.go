package history

// FaultCore is what every record of one scheduled fault says of it: its
// name, its type, its target as written, and what it does to the
// processes it hits. The case meta's faults (ScheduledAt), faults.jsonl's
// records (internal/layout.Fault) and realized.json's (internal/realized)
// are each this core and what that record adds.
type FaultCore struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Target string `json:"target"`
	// Effect is what the fault does to the processes it targets, declared
	// by its registration (faults.Info.Effect): what the checker reads
	// (MODEL §4, §10), never the type's name.
	Effect FaultEffect `json:"effect,omitempty"`
}

// FaultEffect is what a fault does to the processes it targets.
type FaultEffect string

// The effects on processes.
const (
	// EffectNone: the processes run on (a link, a rule, a clock, a disk).
	EffectNone FaultEffect = ""
	// EffectStop stops them for the window and resumes them at its end
	// (pause).
	EffectStop FaultEffect = "stop"
	// EffectKill ends them at the fault's start (kill).
	EffectKill FaultEffect = "kill"
	// EffectPowerLoss ends them and loses what they never made durable
	// (power-loss).
	EffectPowerLoss FaultEffect = "power-loss"
)

// Ends reports whether the effect ends the processes it hits.
func (e FaultEffect) Ends() bool { return e == EffectKill || e == EffectPowerLoss }

// effectBefore is the effect of the faults whose records were written
// before records carried it: the record's type then said it.
var effectBefore = map[string]FaultEffect{"pause": EffectStop, "kill": EffectKill, "power-loss": EffectPowerLoss}

// EffectOf is the fault's effect: its record's, or for a record written
// before records carried it, the one its type had then.
func (c FaultCore) EffectOf() FaultEffect {
	if c.Effect != "" {
		return c.Effect
	}
	return effectBefore[c.Type]
}
