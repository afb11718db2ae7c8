// Package resource is the protected resource: a pair of registers per key
// that clients read and write inside their critical section, hosted by the
// coordinator and reached by workers over loopback (directly, or through a
// proxy when a fault acts on link:resource).
//
// Every request hits both registers:
//
//   - The unfenced register accepts every write. A write based on a value
//     that someone else overwrote after this client read it is a lost
//     update: the damage two holders do without fencing.
//   - The fenced register checks the client's fencing token on every read
//     and write, like the seeds' StorageSystem and
//     `UPDATE … WHERE fencing_token < $2`: a token lower than the highest
//     it has seen is rejected (a stale holder stopped). Checking reads too
//     means that once the new holder has read with its higher token, the old
//     holder's late write is refused even if the new holder has not written
//     yet. A different holder presenting a token equal to the highest seen
//     is accepted but flagged (the token failed to tell them apart; never
//     flagged for token 0, which means the backend has no tokens), and an
//     accepted write whose read value had since changed is a stale write
//     that fencing let through. That is the default check, `at-least`
//     (Check); `greater` is the strict one (`token > last`: another
//     holder's token equal to the highest seen is refused too), and
//     `not-equal` the weaker one some storage implements (`token !=
//     last`): it refuses only a token equal to the last one seen from
//     another holder, so an older holder's lower token passes, and after
//     a token regression the new holder's lower token does too.
//
// The resource remembers what each client last read, so a write carries no
// values: a client whose work takes no time sends its read and its write
// together and pays one round trip for its critical section. Each request
// carries the client's deadline on the shared monotonic clock; a request
// that arrives after it (the client had already given up) is still applied,
// as real storage would, but its mark says it was late: many late requests
// outside any fault mean the harness, not the lock, is slow.
//
// The protocol is one line per request and reply:
//
//	R <key> <token> <proc> <deadline> -> <unfenced> <fenced|-1>
//	W <key> <token> <proc> <deadline> -> <ok|lost> <accepted|rejected|stale>
//	A <key> <proc>                    -> ok   (the client abandoned its work)
package resource

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/monoclock"
)

// Check is the fenced register's rule for a request's token.
type Check string

// The checks a resource can apply (the workload's fencing_check). Every
// check passes a holder's own token again (its read and its write carry
// the same one), and token 0 (no token) always.
const (
	// CheckAtLeast passes a token at least the highest seen; an equal one
	// from another holder passes too, flagged as a reuse (the default:
	// it shows what a repeated token lets through).
	CheckAtLeast Check = "at-least"
	// CheckGreater passes another holder's token only above the highest
	// seen: `token > last`, the check fencing calls for.
	CheckGreater Check = "greater"
	// CheckNotEqual passes a token unless it equals the last token seen and
	// comes from another holder: `token != last`.
	CheckNotEqual Check = "not-equal"
)

// Checks are the names a workload may give, the default first.
var Checks = []Check{CheckAtLeast, CheckGreater, CheckNotEqual}

type fencedReg struct {
	value  int64
	max    uint64 // the highest token seen (greater) or the last (not-equal)
	holder string
}

// read is what a client read last: the key and both values.
type read struct {
	key  string
	u, f int64
}

// Server is the protected resource.
type Server struct {
	ln    net.Listener
	emit  func(*history.Event)
	check Check

	mu       sync.Mutex
	unfenced map[string]int64
	fenced   map[string]*fencedReg
	reads    map[string]read // proc -> its last read, until it writes or abandons
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
	closed   bool
}

// Listen starts the resource on a free port of host; its fenced register
// applies check ("" is CheckAtLeast). emit receives a res-read or
// res-write mark for every request (T is left for emit to set).
func Listen(host string, check Check, emit func(*history.Event)) (*Server, error) {
	if check == "" {
		check = CheckAtLeast
	}
	if !slices.Contains(Checks, check) {
		return nil, fmt.Errorf("resource: unknown fencing check %q", check)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("resource listen: %w", err)
	}
	s := &Server{ln: ln, emit: emit, check: check, unfenced: map[string]int64{}, fenced: map[string]*fencedReg{},
		reads: map[string]read{}, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the resource listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// InCriticalSection returns the clients that have read a key and not yet
// written it, mapped to that key: the current holders doing their work.
func (s *Server) InCriticalSection() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.reads))
	for p, r := range s.reads {
		out[p] = r.key
	}
	return out
}

// Values returns the unfenced and fenced values of key.
func (s *Server) Values(key string) (int64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var f int64
	if r := s.fenced[key]; r != nil {
		f = r.value
	}
	return s.unfenced[key], f
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReaderSize(c, 32<<10)
	w := bufio.NewWriterSize(c, 32<<10)
	var reply []byte
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		reply, err = s.handle(reply[:0], line)
		if err != nil {
			reply = append(append(reply[:0], "ERR "...), err.Error()...)
		}
		reply = append(reply, '\n')
		if _, err := w.Write(reply); err != nil {
			return
		}
		// Requests that came together are answered together: flush once
		// the connection has nothing more waiting.
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// fields splits a request line on spaces into at most 5 fields.
func fields(line []byte, f *[5][]byte) int {
	n := 0
	for len(line) > 0 && n < 5 {
		for len(line) > 0 && (line[0] == ' ' || line[0] == '\n' || line[0] == '\r') {
			line = line[1:]
		}
		if len(line) == 0 {
			break
		}
		i := 0
		for i < len(line) && line[i] != ' ' && line[i] != '\n' && line[i] != '\r' {
			i++
		}
		f[n] = line[:i]
		n++
		line = line[i:]
	}
	for len(line) > 0 && (line[0] == ' ' || line[0] == '\n' || line[0] == '\r') {
		line = line[1:]
	}
	if len(line) > 0 {
		return 6 // too many fields
	}
	return n
}

// handle answers one request line, appending the reply to out.
func (s *Server) handle(out, line []byte) ([]byte, error) {
	var f [5][]byte
	n := fields(line, &f)
	if n == 0 {
		return out, errors.New("empty request")
	}
	switch {
	case (string(f[0]) == "R" || string(f[0]) == "W") && n == 5:
		tok, err1 := strconv.ParseUint(string(f[2]), 10, 64)
		deadline, err2 := strconv.ParseInt(string(f[4]), 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return out, fmt.Errorf("bad request: %v", err)
		}
		late := monoclock.Now() > deadline
		key, proc := string(f[1]), string(f[3])
		if f[0][0] == 'R' {
			u, fv, verdict, reuse := s.read(key, tok, proc)
			s.emit(&history.Event{Type: history.Mark, F: history.MarkResRead, Proc: proc, Key: key, Token: tok, Fenced: verdict, Reuse: reuse, Late: late})
			out = strconv.AppendInt(out, u, 10)
			out = append(out, ' ')
			return strconv.AppendInt(out, fv, 10), nil
		}
		lost, verdict, reuse, err := s.write(key, tok, proc)
		if err != nil {
			return out, err
		}
		s.emit(&history.Event{Type: history.Mark, F: history.MarkResWrite, Proc: proc, Key: key, Token: tok, Lost: lost, Fenced: verdict, Reuse: reuse, Late: late})
		if lost {
			out = append(out, "lost "...)
		} else {
			out = append(out, "ok "...)
		}
		return append(out, verdict...), nil
	case string(f[0]) == "A" && n == 3:
		s.Forget(string(f[2]))
		return append(out, "ok"...), nil
	}
	return out, fmt.Errorf("bad request %q", strings.TrimSpace(string(line)))
}

// check applies the fencing rule c to a request with tok from proc and
// records the token as seen. It returns whether the request passes and
// whether it reused the highest token from another holder (token 0 is no
// token: never a reuse, and never refused by not-equal, which then has
// nothing to compare).
func (reg *fencedReg) check(c Check, tok uint64, proc string) (ok, reuse bool) {
	if c == CheckNotEqual {
		if tok > 0 && tok == reg.max && reg.holder != "" && reg.holder != proc {
			return false, false
		}
		if tok > 0 {
			reg.max, reg.holder = tok, proc
		}
		return true, false
	}
	if tok < reg.max {
		return false, false
	}
	if c == CheckGreater && tok > 0 && tok == reg.max && reg.holder != "" && reg.holder != proc {
		return false, false
	}
	reuse = tok > 0 && tok == reg.max && reg.holder != "" && reg.holder != proc
	reg.max, reg.holder = tok, proc
	return true, reuse
}

func (s *Server) reg(key string) *fencedReg {
	r := s.fenced[key]
	if r == nil {
		r = &fencedReg{}
		s.fenced[key] = r
	}
	return r
}

func (s *Server) read(key string, tok uint64, proc string) (u, f int64, verdict string, reuse bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reg := s.reg(key)
	ok, reuse := reg.check(s.check, tok, proc)
	u, f, verdict = s.unfenced[key], reg.value, history.FencedAccepted
	if !ok {
		f, verdict, reuse = -1, history.FencedRejected, false
	}
	s.reads[proc] = read{key: key, u: u, f: f}
	return u, f, verdict, reuse
}

func (s *Server) write(key string, tok uint64, proc string) (lost bool, verdict string, reuse bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd, ok := s.reads[proc]
	if !ok || rd.key != key {
		return false, "", false, fmt.Errorf("%s writes %s without having read it", proc, key)
	}
	delete(s.reads, proc)
	lost = s.unfenced[key] != rd.u
	s.unfenced[key] = rd.u + 1
	reg := s.reg(key)
	passed, reuse := reg.check(s.check, tok, proc)
	if !passed || rd.f < 0 {
		return lost, history.FencedRejected, false, nil
	}
	verdict = history.FencedAccepted
	if reg.value != rd.f {
		verdict = history.FencedStale
	}
	reg.value = rd.f + 1
	return lost, verdict, reuse, nil
}

// Forget drops proc from the critical-section table (its client gave up
// without writing, or its instance died).
func (s *Server) Forget(proc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.reads, proc)
}

// Close stops the resource and closes every connection.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}
