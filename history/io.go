package history

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Writer appends events to a JSON Lines stream. It buffers; call Flush to
// push what was written so far (the coordinator flushes regularly so that a
// crash leaves a readable history). It is not safe for concurrent use.
type Writer struct {
	bw  *bufio.Writer
	buf []byte
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 64<<10)}
}

// Write appends one event as one line.
func (w *Writer) Write(e *Event) error {
	w.buf = append(AppendJSON(w.buf[:0], e), '\n')
	return w.WriteLine(w.buf)
}

// WriteLine appends a line that already holds one encoded event (with its
// newline), as a worker sent it.
func (w *Writer) WriteLine(line []byte) error {
	if _, err := w.bw.Write(line); err != nil {
		return fmt.Errorf("write history event: %w", err)
	}
	return nil
}

// Flush writes buffered events to the underlying writer.
func (w *Writer) Flush() error { return w.bw.Flush() }

// Reader reads a history stream line by line, modelled on bufio.Scanner:
//
//	r := history.NewReader(f)
//	for r.Next() { use(r.Event()) }
//	if err := r.Err(); err != nil { ... }
//
// A last line without its newline that does not parse (a history cut short
// by a crash) is skipped and reported by Truncated, not treated as an error.
// Any other line that does not parse is an error naming the line. The Event
// returned by Event is reused by the next call to Next: copy what you keep.
type Reader struct {
	sc        *bufio.Scanner
	dec       *Decoder
	line      int
	ev        Event
	err       error
	truncated string
	name      string
}

// NewReader returns a Reader on r; name is used in error messages.
func NewReader(r io.Reader, name string) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	sc.Split(scanLinesKeepEnd)
	return &Reader{sc: sc, name: name, dec: NewDecoder()}
}

// scanLinesKeepEnd is bufio.ScanLines but keeps the newline, so the reader
// can tell a complete line from a truncated last one.
func scanLinesKeepEnd(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i+1], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// Next advances to the next event. It returns false at the end or on error.
func (r *Reader) Next() bool {
	if r.err != nil {
		return false
	}
	for r.sc.Scan() {
		r.line++
		raw := r.sc.Bytes()
		complete := len(raw) > 0 && raw[len(raw)-1] == '\n'
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) == 0 {
			continue
		}
		if err := r.dec.Decode(trimmed, &r.ev); err != nil {
			if !complete {
				r.truncated = fmt.Sprintf("%s:%d: truncated last line skipped (%d bytes)", r.name, r.line, len(raw))
				return false
			}
			r.err = fmt.Errorf("%s:%d: not a history event: %w", r.name, r.line, err)
			return false
		}
		return true
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			r.err = fmt.Errorf("%s:%d: a line longer than %d MiB: not a history event", r.name, r.line+1, MaxLine>>20)
		} else {
			r.err = fmt.Errorf("%s:%d: read history: %w", r.name, r.line+1, err)
		}
	}
	return false
}

// MaxLine is the longest history line a reader takes (an event is a few
// hundred bytes).
const MaxLine = 16 << 20

// Event returns the current event.
func (r *Reader) Event() *Event { return &r.ev }

// Name is the name the reader was given for its error messages.
func (r *Reader) Name() string { return r.name }

// Line returns the line number of the current event.
func (r *Reader) Line() int { return r.line }

// Err returns the first error met, if any.
func (r *Reader) Err() error { return r.err }

// Truncated describes a skipped truncated last line, or returns "".
func (r *Reader) Truncated() string { return r.truncated }

// ops says, for each operation name, which event types it may have.
var ops = map[string][]Type{
	OpAcquire:        {Invoke, OK, Fail, Unsent, Info},
	OpRelease:        {Invoke, OK, Fail, Unsent, Info},
	OpExtend:         {Invoke, OK, Fail, Unsent, Info},
	OpForeignRelease: {Invoke, OK, Fail, Unsent, Info},
	OpStore:          {Invoke, OK, Fail, Unsent, Info},
	OpLost:           {OK},
	OpResource:       {Info},
	OpDropped:        {OK},
	OpJob:            {Invoke, OK, Fail, Info},
	OpEffect:         {Invoke, OK, Fail, Info},
}

var marks = map[string]bool{
	MarkCaseStart: true, MarkCaseStop: true, MarkCaseEnd: true, MarkFaultStart: true, MarkFaultEnd: true,
	MarkFaultError: true, MarkFaultUnobserved: true, MarkFaultIdle: true, MarkCrash: true,
	MarkResRead: true, MarkResWrite: true, MarkHarness: true, MarkStoreTotals: true,
	MarkSinkEffect: true,
}

// validate holds an event to the record's language (checker/MODEL.md §1).
func (e *Event) validate() error {
	switch e.Type {
	case Invoke, OK, Fail, Unsent, Info, Mark:
	case "":
		return fmt.Errorf("event has no type")
	default:
		return fmt.Errorf("unknown event type %q", e.Type)
	}
	if e.F == "" {
		return fmt.Errorf("event has no f (operation or mark name)")
	}
	if e.T < 0 {
		return fmt.Errorf("negative time %d", e.T)
	}
	if e.Intended < 0 {
		return fmt.Errorf("negative intended time %d", e.Intended)
	}
	switch e.Fenced {
	case "", FencedAccepted, FencedRejected, FencedStale:
	default:
		return fmt.Errorf("fenced: %q is not accepted, rejected or stale", e.Fenced)
	}
	if e.Attempt < 0 {
		return fmt.Errorf("negative attempt %d", e.Attempt)
	}
	switch e.Outcome {
	case "", OutcomeApplied, OutcomeDuplicate, OutcomeStale:
	default:
		return fmt.Errorf("outcome: %q is not applied, duplicate or stale", e.Outcome)
	}
	if e.Type == Mark {
		if !marks[e.F] {
			return fmt.Errorf("unknown mark %q", e.F)
		}
		switch e.F {
		case MarkFaultStart, MarkFaultEnd, MarkFaultError, MarkFaultUnobserved, MarkFaultIdle:
			if e.Fault == "" {
				return fmt.Errorf("%s mark names no fault", e.F)
			}
		case MarkCrash:
			if !isProc(e.Proc, false) {
				return fmt.Errorf("crash mark: proc %q is not an instance i<N>", e.Proc)
			}
		case MarkResRead, MarkResWrite:
			if !isProc(e.Proc, true) || e.Key == "" {
				return fmt.Errorf("%s mark needs a client proc i<N>c<M> and a key (proc %q, key %q)", e.F, e.Proc, e.Key)
			}
		case MarkSinkEffect:
			if !isProc(e.Proc, true) || e.Key == "" || e.Attempt < 1 || e.Outcome == "" {
				return fmt.Errorf("sink-effect mark needs a client proc i<N>c<M>, a job key, an attempt >= 1 and an outcome (proc %q, key %q, attempt %d, outcome %q)", e.Proc, e.Key, e.Attempt, e.Outcome)
			}
		}
		return nil
	}
	types, known := ops[e.F]
	if !known {
		return fmt.Errorf("unknown operation %q", e.F)
	}
	if !slices.Contains(types, e.Type) {
		return fmt.Errorf("%s cannot be of type %s", e.F, e.Type)
	}
	if e.F == OpDropped {
		if !isProc(e.Proc, false) {
			return fmt.Errorf("dropped: proc %q is not an instance i<N>", e.Proc)
		}
		return nil
	}
	if !isProc(e.Proc, true) {
		return fmt.Errorf("%s %s: proc %q is not a client i<N>c<M>", e.Type, e.F, e.Proc)
	}
	if e.Key == "" && e.F != OpResource {
		return fmt.Errorf("%s %s of %s has no key", e.Type, e.F, e.Proc)
	}
	if (e.F == OpJob || e.F == OpEffect) && e.Attempt < 1 {
		return fmt.Errorf("%s %s of %s on %s has no attempt (>= 1)", e.Type, e.F, e.Proc, e.Key)
	}
	return nil
}

// isProc reports whether s is a client "i<N>c<M>" (client) or an instance
// "i<N>" (not client), N >= 1.
func isProc(s string, client bool) bool {
	if len(s) < 2 || s[0] != 'i' {
		return false
	}
	inst, c, has := strings.Cut(s[1:], "c")
	if has != client || !number(inst) || inst[0] == '0' {
		return false
	}
	return !client || number(c)
}

func number(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
