package sim

// The simulator's own knowledge of a case, recorded as the simulation runs
// (never by reading the history back). Every record points at the events
// it describes by their index in the run's event list, so that the truth
// can be worked out for any prefix of the run (a history cut short, or
// merged back with its tail journal).

// opRec is one lock operation of a client (MODEL §3).
type opRec struct {
	id      int
	client  string
	inst    int
	kind    string // acquire, release, extend, release-wrong-token
	key     string
	invIdx  int
	compIdx int    // -1: no completion recorded
	outcome string // ok, fail, info: the recorded completion
	token   uint64
	// postInv: the invoke was recorded while the instance was already dead
	// (being killed): the whole operation is posthumous. postComp: only the
	// completion was.
	postInv, postComp bool
	// dup: an ok acquire while the client already held the key (§5).
	dup bool
	// okAttempt: the attempt whose grant the ok reports.
	okAttempt int
	// hold: for an ok acquire the hold it began or continued; for a
	// release the hold its invoke ended (nil when it ended none).
	hold *holdRec
}

// holdRec is a client's belief that it holds a key (MODEL §5).
type holdRec struct {
	client   string
	inst     int
	key      string
	beginIdx int
	endIdx   int    // -1: still in force when the simulation ended
	endKind  string // release, lost, death, end
	acq      *opRec
	rel      *opRec // the release whose invoke ended it
}

// waitRec: a client waiting for a key (MODEL §11).
type waitRec struct {
	client   string
	inst     int
	key      string
	beginIdx int
	endIdx   int
	endKind  string // ok, other-key, death, stop
}

type lostRec struct {
	client string
	inst   int
	key    string
	idx    int
	post   bool
}

// instRec: an instance's life (MODEL §4).
type instRec struct {
	n          int
	deathIdx   int // the first of its kill's fault-start and its crash mark
	deathKind  string
	crashIdx   int
	crashFault string
	// crashAfterStop: the harness killed it after the stop (it did not
	// exit cleanly).
	crashAfterStop bool
}

// faultRec: what happened to one scheduled fault (MODEL §10).
type faultRec struct {
	spec          FaultSpec
	startIdx      int
	endIdx        int
	healErr       bool
	errorIdx      int
	unobservedIdx int
	idleIdx       int
	target        string // concrete, at fault-start
	pauseInsts    []int  // a pause on instances: which
	killInsts     []int  // a kill of instances: which
	isLink        bool
	dupStartIdx   int // malformed: a second fault-start
	// aimed: the target was the holder role (holder-of:<aimKey> when
	// aimKey is set), resolved at the fault-start (MODEL §10)
	aimed  bool
	aimKey string
}

type resRec struct {
	idx    int
	inst   int
	key    string
	write  bool
	lost   bool
	fenced string
	reuse  bool
	late   bool
}

// appliedRec: the service applied one request of an operation at sim
// time x (the service's own log: a linearization witness, MODEL §8).
type appliedRec struct {
	x       int64
	op      *opRec
	attempt int
	result  string // granted, refused, released, notheld, extended, notextended, other
	token   uint64
}

// ievent is an event of instance inst (0: of the coordinator), on key
// ("" when it names none).
type ievent struct {
	idx, inst int
	key       string
}

// caseRec is everything the simulator knows of one case, or, for a case
// whose trials ran side by side, of one lane (a view: see lane.go).
type caseRec struct {
	cfg      *caseConfig
	meta     CaseMeta
	startIdx int
	stopIdx  int
	endIdx   int
	lastIdx  int // the case's last event: its case-end, or the one before the next case-start
	harness  *HarnessStats
	harnIdx  int

	lane  int      // 1-based in a lane's view, 0 for a case
	keys  []string // the case's (lane's) keys
	laned *caseRec // a lane's case

	ops     []*opRec
	holds   []*holdRec
	waits   []*waitRec
	losts   []*lostRec
	insts   []*instRec
	faults  []*faultRec
	res     []*resRec
	applied []*appliedRec

	resFail     []ievent // `resource` info events (failed resource requests)
	late        []ievent // resource marks with late
	strayMarks  []int    // malformed: a fault mark naming no scheduled fault
	strayComps  []ievent // malformed: a completion with no operation in flight
	backdated   []int    // out of order (a later event dated earlier)
	backdatedOp bool     // one of them is an operation's event
	earlyIdx    []int    // dated before the case start
	afterEnd    []int    // after the case-end: no case's (MODEL §2)
	outsideInst []ievent // of an instance beyond the lanes (MODEL §14)
	foreignKey  []ievent // a client's event on another lane's key (MODEL §14)
	dropped     []ievent // `dropped` notifications (open loop, MODEL §19)
	misbehaved  bool     // a broken service deviated from a lease lock
	misbehavior []string
	thresholds  []thresholdRec
}

// thresholdRec: one of the case's thresholds, as this package wrote it.
type thresholdRec struct {
	source string
	metric string
	op     string
	value  float64 // a count, or ms
}
