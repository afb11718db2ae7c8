package sim

// register is the protected resource (MODEL §9): an unfenced register that
// accepts every write, and a fenced one that checks tokens. One request
// reaches both; the mark carries both verdicts.
type register struct {
	w       *world
	key     string
	uVer    int
	fVer    int
	fMax    uint64
	fHas    bool
	fHolder string
	reads   map[string]readState
}

type readState struct {
	uVer, fVer int
	fOK        bool
}

func (r *register) serve(c *client, write bool, token uint64, late bool) {
	e := &Event{Type: "mark", F: "res-read", Proc: c.name, Key: r.key, Token: token, Late: late}
	if write {
		e.F = "res-write"
	}
	rec := &resRec{write: write, late: late, inst: c.in.n, key: r.key}
	// the fenced register
	switch {
	case r.fHas && token < r.fMax:
		e.Fenced = "rejected"
	default:
		if !r.fHas || token > r.fMax {
			r.fMax, r.fHas, r.fHolder = token, true, c.name
		} else if c.name != r.fHolder {
			e.Reuse = true
		}
		e.Fenced = "accepted"
		if write {
			if rs, ok := r.reads[c.name]; ok && rs.fOK && rs.fVer != r.fVer {
				e.Fenced = "stale"
			}
			r.fVer++
		}
	}
	// the unfenced register
	if write {
		if rs, ok := r.reads[c.name]; ok && rs.uVer != r.uVer {
			e.Lost = true
		}
		r.uVer++
		delete(r.reads, c.name)
	} else {
		r.reads[c.name] = readState{uVer: r.uVer, fVer: r.fVer, fOK: e.Fenced == "accepted"}
	}
	rec.lost, rec.fenced, rec.reuse = e.Lost, e.Fenced, e.Reuse
	rec.idx = r.w.emit(e)
	r.w.cr.res = append(r.w.cr.res, rec)
	if late {
		r.w.cr.late = append(r.w.cr.late, ievent{rec.idx, c.in.n, r.key})
	}
}
