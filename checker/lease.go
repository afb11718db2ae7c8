package checker

func (s holdSet) get(key string) *hold {
	for _, h := range s {
		if h.key == key {
			return h
		}
	}
	return nil
}

func (s *holdSet) put(h *hold) { *s = append(*s, h) }

func (s *holdSet) del(h *hold) {
	for i, x := range *s {
		if x == h {
			(*s)[i] = (*s)[len(*s)-1]
			(*s)[len(*s)-1] = nil
			*s = (*s)[:len(*s)-1]
			return
		}
	}
}

// all returns a copy, for loops that end holds as they go.
func (s holdSet) all() []*hold { return append([]*hold(nil), s...) }

// keyOf returns key's state, looking at the client's last key first.
func (c *Case) keyOf(cl *client, key string) *keyLive {
	if cl.last != nil && cl.last.name == key {
		return cl.last
	}
	cl.last = c.live.key(key)
	return cl.last
}

// renewed places an ok renewal of h (an extension, a re-entrant grant)
// invoked at call and answered at t in the allowed world where the grant
// lasts longest (MODEL §6): it took effect at one instant of [call, t]
// with the grant in force, so as late as the grant lets it, min(t, gone),
// and the lease runs from there. When the grant had run out before call
// in that world, extensions of unknown outcome must have landed before it
// (A1: the ok is the service's word): as few as it takes, the earliest
// first, since each one kept for later is worth a whole lease. With none
// to land, the service's word stands alone: from t.
func (c *Case) renewed(h *hold, call, t int64) {
	if h.gone == never {
		return
	}
	lease := c.meta.LeaseNs
	for h.gone <= call && len(h.pool) > 0 && h.pool[0] < h.gone {
		h.gone += lease
		h.pool = h.pool[1:]
	}
	at := t
	if h.gone > call {
		at = min(t, h.gone)
	}
	h.gone = at + lease
}

// unknownExtend keeps an extension of h whose outcome is unknown: it may
// land at any instant after its invoke while the grant is in force, in
// any order with the others (MODEL §6, A1), so where it lands is decided
// only when the latest expiry is asked for.
func (c *Case) unknownExtend(h *hold, o *op) {
	if h != nil && h.gone != never {
		h.pool = append(h.pool, o.call)
	}
}

// latestExpiry is the latest instant h's lease may run out in an allowed
// world (MODEL §6): after the ok renewals, every extension of unknown
// outcome invoked while the grant may still be in force lands just
// before it runs out, each a lease more (never: no lease to infer from).
func (c *Case) latestExpiry(h *hold) int64 {
	g := h.gone
	if g == never {
		return never
	}
	for _, call := range h.pool {
		if call >= g {
			break
		}
		g += c.meta.LeaseNs
	}
	return g
}

// sureExpiry is when a grant confirmed at t has certainly expired on the
// service: t plus the lease, for a lease nothing renews unseen; never
// otherwise.
func (c *Case) sureExpiry(t int64) int64 {
	if c.meta.LeaseNs <= 0 || c.meta.LeaseRenewed {
		return never
	}
	return t + c.meta.LeaseNs
}
