package driver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// This file reads a driver's stdout: whole lines only, each checked against
// the protocol and matched to the request it answers, or taken as a lost
// signal; anything else breaks the driver with its line.

// read handles the driver's output until it ends or the driver breaks.
func (p *Process) read(r io.ReadCloser) {
	defer close(p.readerDone)
	defer r.Close()
	// Whatever a driver writes, its reader never takes the process down
	// with it: a failure here breaks the driver (its case invalid), and
	// the run goes on.
	defer func() {
		if v := recover(); v != nil {
			p.breakf("lockbench failed reading its output (%v): the driver's case is invalid", v)
		}
	}()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		p.mu.Lock()
		p.lines++
		n := p.lines
		p.mu.Unlock()
		switch {
		case errors.Is(err, errLineTooLong):
			p.breakf("line %d of its output is longer than %d bytes", n, MaxLine)
			return
		case err != nil && len(line) > 0:
			p.ended(fmt.Sprintf(" in the middle of line %d of its output (%s)", n, quote(line)))
			return
		case err != nil:
			p.ended("")
			return
		}
		p.trace("<-", line)
		if n == 1 {
			p.helloCh <- line
			// Nothing after the hello is read before Start has taken it
			// (a driver that floods lines right after its hello used to be
			// read against a hello not yet set).
			select {
			case <-p.helloTaken:
			case <-p.broken:
				return
			}
			continue
		}
		if p.flooding() {
			p.breakf("line %d of its output: it floods its output (more than %d lines no request asked for)", n, p.floodLimit())
			return
		}
		if !p.handle(n, line) {
			return
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line (without its newline), at most MaxLine bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxLine+1 {
			return nil, errLineTooLong
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(buf, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, err
		}
	}
}

// handle dispatches one line after the hello answer; false stops reading.
func (p *Process) handle(n int, line []byte) bool {
	r, err := ParseReply(line)
	if err != nil {
		p.breakf("line %d of its output, %s: %v", n, quote(line), err)
		return false
	}
	switch r.Type {
	case TypeHello:
		p.breakf("line %d of its output is a second answer to hello", n)
		return false
	case TypeBare:
		p.mu.Lock()
		ch := p.bareCh
		if ch != nil {
			p.closing = true // the loop is over: the driver exits next
		}
		p.mu.Unlock()
		if ch == nil {
			p.breakf("line %d of its output is a bare loop's result, but none was asked for", n)
			return false
		}
		ch <- r
		return true
	case TypeLost:
		p.mu.Lock()
		p.unasked++
		p.mu.Unlock()
		return p.lost(n, line, r)
	}
	if r.ID == nil {
		p.breakf("line %d of its output, %s: an error with no id, after the hello", n, quote(line))
		return false
	}
	id := *r.ID
	p.mu.Lock()
	c := p.pending[id]
	if c == nil {
		op, late := p.abandoned[id]
		delete(p.abandoned, id)
		if late && op == TypeAcquire && r.Type == TypeOK {
			// A lease nobody waits for any more: a later lost of it is
			// not a lie.
			p.leases[leaseKey{-1, r.Lease}] = &lease{released: true}
		}
		p.unasked++
		p.mu.Unlock()
		if late {
			return true
		}
		p.breakf("line %d of its output answers id %d, which lockbench did not ask or had its answer already: %s", n, id, quote(line))
		return false
	}
	if msg := p.checkAnswer(c.req, &r); msg != "" {
		p.mu.Unlock()
		p.breakf("line %d of its output, %s, answers %s %d: %s", n, quote(line), c.req.Type, id, msg)
		return false
	}
	delete(p.pending, id)
	a := answer{reply: r, line: n}
	if c.req.Type == TypeAcquire && r.Type == TypeOK {
		a.lease = &lease{p: p, client: c.req.Client, key: c.req.Key, id: r.Lease, lost: make(chan struct{})}
		if r.Token != nil {
			a.lease.token = *r.Token
		}
		k := leaseKey{c.req.Client, r.Lease}
		if old := p.leases[k]; old != nil && !old.released {
			p.mu.Unlock()
			p.breakf("line %d of its output gives client %d lease %q, which it still holds", n, c.req.Client, r.Lease)
			return false
		}
		p.leases[k] = a.lease
	}
	p.mu.Unlock()
	c.done <- a
	return true
}

// MaxUnasked is how many lines a driver may write that answer no
// pending request (lost signals, late answers to abandoned calls) beyond
// one per request it was sent: past it, it floods.
const MaxUnasked = 10_000

// floodLimit is how many unasked lines the driver may have written by now.
func (p *Process) floodLimit() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return MaxUnasked + int(p.nextID)
}

// flooding reports whether the driver has written more lines nobody asked
// for than floodLimit allows.
func (p *Process) flooding() bool {
	lim := p.floodLimit()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unasked > lim
}

// abilities is what the hello said the driver can do (none when it said
// nothing). The caller holds p.mu.
func (p *Process) abilities() Abilities {
	if p.hello.Abilities == nil {
		return Abilities{}
	}
	return *p.hello.Abilities
}

// checkAnswer says what is wrong with r as the answer to req ("": nothing).
func (p *Process) checkAnswer(req Request, r *Reply) string {
	ab := p.abilities()
	if r.Type == TypeError {
		switch {
		case r.Code == CodeHeld && req.Type != TypeAcquire:
			return "code held answers only an acquire"
		case r.Code == CodeNotHeld && req.Type != TypeRelease && req.Type != TypeExtend:
			return "code not_held answers only a release or an extend"
		case r.Code == CodeOptions:
			return "code options answers only the hello"
		}
		return ""
	}
	switch req.Type {
	case TypeAcquire:
		switch {
		case r.Lease == "":
			return "an ok to an acquire must give the lease's handle"
		case ab.Token && (r.Token == nil || *r.Token == 0):
			return "the driver said its leases carry fencing tokens, but this one has none (or 0)"
		case !ab.Token && r.Token != nil:
			return "the driver said it has no fencing tokens, but this lease carries one"
		}
	default:
		if r.Lease != "" || r.Token != nil {
			return fmt.Sprintf("an ok to %s %s carries a lease or a token", articleOf(req.Type), req.Type)
		}
	}
	return ""
}

// lost handles a driver's word that a lease is gone.
func (p *Process) lost(n int, line []byte, r Reply) bool {
	if r.Client == nil {
		p.breakf("line %d of its output, %s: a lost signal with no client", n, quote(line))
		return false
	}
	p.mu.Lock()
	canLose := p.abilities().Lost
	l := p.leases[leaseKey{*r.Client, r.Lease}]
	if l == nil {
		l = p.leases[leaseKey{-1, r.Lease}]
	}
	p.mu.Unlock()
	switch {
	case !canLose:
		p.breakf("line %d of its output, %s: the driver said it has no lost signal", n, quote(line))
		return false
	case l == nil:
		p.breakf("line %d of its output, %s: client %d never had that lease", n, quote(line), *r.Client)
		return false
	}
	l.markLost()
	return true
}
