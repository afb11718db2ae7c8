package sim

import "fmt"

// Service variants.
const (
	Correct        = "correct"          // a lease lock with fencing tokens
	GrantWhileHeld = "grant-while-held" // sometimes grants a key held under a valid lease
	NoExpiry       = "no-expiry"        // never frees an expired lease, nor a dead holder's
	ReleaseOther   = "release-other"    // a non-holder's release sometimes frees the key
	TokenReset     = "token-reset"      // the token counter goes back
	LateLost       = "late-lost"        // revokes early; the holder hears of it late or never
)

// Variants lists every service variant.
var Variants = []string{Correct, GrantWhileHeld, NoExpiry, ReleaseOther, TokenReset, LateLost}

type lockEntry struct {
	holder  string
	inst    int
	grant   int64
	token   uint64
	expires int64
}

type grantInfo struct {
	token uint64
	grant int64
}

// service is the model lock service: one lock table, its keys spread over
// the servers (each key on one server, whose faults make it unavailable).
type service struct {
	w           *world
	variant     string
	lease       int64 // 0: no lease
	fenced      bool
	freeOnDeath bool
	notify      bool // tells the holder when it expires its lease
	noExpiry    bool
	misP        float64
	locks       map[string]*lockEntry
	counter     map[string]uint64
	grantSeq    int64
	pending     map[string][]*pendingAcq // queue mode: refused acquires waiting for the key
}

// pendingAcq is an acquire the service keeps waiting for its key (queue
// mode: a lock recipe's watch), until it can grant it or its wait ends.
type pendingAcq struct {
	c       *client
	op      *opRec
	attempt int
	until   int64
}

func (s *service) log(op *opRec, attempt int, result string, token uint64) {
	s.w.cr.applied = append(s.w.cr.applied, &appliedRec{x: s.w.now, op: op, attempt: attempt, result: result, token: token})
}

func (s *service) misbehave(what string) {
	s.w.cr.misbehaved = true
	s.w.cr.misbehavior = append(s.w.cr.misbehavior, fmt.Sprintf("%s at %d", what, s.w.now))
}

// expireDue frees key's lease if it has run out (lazily, at the next
// request, or at the expiry timer).
func (s *service) expireDue(key string) {
	le := s.locks[key]
	if le == nil || s.noExpiry || s.w.now < le.expires {
		return
	}
	delete(s.locks, key)
	if s.notify {
		s.sendLost(key, le, 0)
	}
	s.grantQueued(key)
}

// queueAcquire keeps a refused acquire waiting for its key (queue mode):
// it is granted when the key is freed, or refused when its wait ends.
func (s *service) queueAcquire(c *client, op *opRec, attempt int) {
	w := s.w
	p := &pendingAcq{c: c, op: op, attempt: attempt, until: w.now + w.cfg.opTimeout/2}
	if s.pending == nil {
		s.pending = map[string][]*pendingAcq{}
	}
	s.pending[op.key] = append(s.pending[op.key], p)
	srv := w.serverOf(op.key)
	w.at(p.until, func() {
		if !s.dropPending(op.key, p) {
			return
		}
		w.reply(c.in, srv, 0, func() { c.onAcquireReply(op, attempt, "refused", grantInfo{}) })
	})
}

func (s *service) dropPending(key string, p *pendingAcq) bool {
	q := s.pending[key]
	for i, o := range q {
		if o == p {
			s.pending[key] = append(q[:i:i], q[i+1:]...)
			return true
		}
	}
	return false
}

// grantQueued grants a freed key to the first acquire waiting for it whose
// client still waits for that attempt.
func (s *service) grantQueued(key string) {
	w := s.w
	for len(s.pending[key]) > 0 && s.locks[key] == nil {
		p := s.pending[key][0]
		s.pending[key] = s.pending[key][1:]
		c := p.c
		if w.now >= p.until || c.op != p.op || c.attempt != p.attempt || !c.in.alive() {
			continue
		}
		srv := w.server(w.serverOf(key))
		if srv.down > 0 || srv.paused > 0 {
			return
		}
		ng := s.newGrant(key, c)
		s.log(p.op, p.attempt, "granted", ng.token)
		gi := grantInfo{token: ng.token, grant: ng.grant}
		op, a := p.op, p.attempt
		w.reply(c.in, w.serverOf(key), 0, func() { c.onAcquireReply(op, a, "granted", gi) })
	}
}

func (s *service) sendLost(key string, le *lockEntry, extra int64) {
	c := s.w.clientByName(le.holder)
	if c == nil {
		return
	}
	grant := le.grant
	s.w.reply(c.in, s.w.serverOf(key), extra, func() { c.onServiceLost(key, grant) })
}

func (s *service) newGrant(key string, c *client) *lockEntry {
	s.grantSeq++
	le := &lockEntry{holder: c.name, inst: c.in.n, grant: s.grantSeq, expires: never}
	if s.fenced {
		s.counter[key]++
		le.token = s.counter[key]
	}
	if s.lease > 0 {
		le.expires = s.w.now + s.lease
		if (s.notify || s.w.cfg.queue) && !s.noExpiry {
			s.w.at(le.expires, func() {
				if s.locks[key] == le {
					srv := s.w.server(s.w.serverOf(key))
					if srv.down == 0 && srv.paused == 0 {
						s.expireDue(key)
					}
				}
			})
		}
	}
	s.locks[key] = le
	if s.variant == LateLost && s.lease > 0 && s.w.chance(s.misP) {
		d := int64(float64(s.w.cfg.holdMax) * (0.1 + 0.9*s.w.rng.Float64()))
		at := s.w.now + min(d, s.lease*9/10)
		s.w.at(at, func() {
			if s.locks[key] != le {
				return
			}
			delete(s.locks, key)
			s.misbehave("revoked " + key + " of " + le.holder + " early")
			switch r := s.w.rng.Float64(); {
			case r < 0.35:
				s.sendLost(key, le, s.w.uniform(1e6, 5e6))
			case r < 0.75:
				s.sendLost(key, le, s.w.uniform(150e6, 700e6))
			}
		})
	}
	return le
}

func (s *service) acquire(c *client, op *opRec, attempt int) (string, grantInfo) {
	s.expireDue(op.key)
	le := s.locks[op.key]
	switch {
	case le == nil, le.holder == c.name:
	case s.variant == GrantWhileHeld && s.w.chance(s.misP):
		s.misbehave("granted " + op.key + " to " + c.name + " while " + le.holder + " held it")
	default:
		s.log(op, attempt, "refused", 0)
		if s.w.cfg.queue && !c.reentrant {
			s.queueAcquire(c, op, attempt)
			return "queued", grantInfo{}
		}
		return "refused", grantInfo{}
	}
	ng := s.newGrant(op.key, c)
	s.log(op, attempt, "granted", ng.token)
	return "granted", grantInfo{token: ng.token, grant: ng.grant}
}

func (s *service) release(c *client, op *opRec) string {
	s.expireDue(op.key)
	le := s.locks[op.key]
	switch {
	case le != nil && le.holder == c.name:
	case le != nil && s.variant == ReleaseOther && s.w.chance(s.misP):
		s.misbehave("released " + op.key + " of " + le.holder + " for " + c.name)
	default:
		s.log(op, 0, "notheld", 0)
		return "notheld"
	}
	delete(s.locks, op.key)
	s.log(op, 0, "released", 0)
	s.grantQueued(op.key)
	return "released"
}

func (s *service) extend(c *client, op *opRec) string {
	s.expireDue(op.key)
	le := s.locks[op.key]
	if le == nil || le.holder != c.name {
		s.log(op, 0, "notextended", 0)
		return "notextended"
	}
	if s.lease > 0 {
		le.expires = s.w.now + s.lease
	}
	s.log(op, 0, "extended", 0)
	return "extended"
}

// wrongRelease: a release with a lease value not the caller's own.
func (s *service) wrongRelease(c *client, op *opRec) string {
	s.expireDue(op.key)
	le := s.locks[op.key]
	if le != nil && s.variant == ReleaseOther && s.w.chance(s.misP) {
		delete(s.locks, op.key)
		s.misbehave("accepted a wrong-token release of " + op.key)
		s.log(op, 0, "other", 0)
		s.grantQueued(op.key)
		return "released"
	}
	s.log(op, 0, "other", 0)
	return "notheld"
}

// freeInstance: the service sees a dead instance's connections close.
func (s *service) freeInstance(n int) {
	for _, k := range s.w.cfg.keyNames() {
		if le := s.locks[k]; le != nil && le.inst == n {
			delete(s.locks, k)
			s.grantQueued(k)
		}
	}
}

// resetTokens: the token counter of srv's keys goes back (a restart
// without persistence, or a failover to a lagging replica).
func (s *service) resetTokens(srv string) {
	for _, k := range s.w.cfg.keyNames() {
		if s.w.serverOf(k) != srv || s.counter[k] == 0 {
			continue
		}
		s.counter[k] = s.counter[k] / uint64(2+s.w.rng.IntN(3))
		s.misbehave(fmt.Sprintf("token counter of %s back to %d", k, s.counter[k]))
	}
}
