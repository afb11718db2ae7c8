package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// AppendJSON appends e as one JSON object, exactly as encoding/json would
// write it (field order, omitempty, escaping), without reflection: the
// history is written, and events cross from workers to the coordinator, at
// hundreds of thousands per second.
func AppendJSON(b []byte, e *Event) []byte {
	b = append(b, `{"t":`...)
	b = strconv.AppendInt(b, e.T, 10)
	b = append(b, `,"type":`...)
	b = appendString(b, string(e.Type))
	b = append(b, `,"f":`...)
	b = appendString(b, e.F)
	b = optString(b, `,"proc":`, e.Proc)
	b = optString(b, `,"key":`, e.Key)
	if e.Token != 0 {
		b = append(b, `,"token":`...)
		b = strconv.AppendUint(b, e.Token, 10)
	}
	b = optString(b, `,"err":`, e.Err)
	if e.Lost {
		b = append(b, `,"lost":true`...)
	}
	b = optString(b, `,"fenced":`, e.Fenced)
	if e.Reuse {
		b = append(b, `,"reuse":true`...)
	}
	if e.Late {
		b = append(b, `,"late":true`...)
	}
	b = optString(b, `,"fault":`, e.Fault)
	b = optString(b, `,"target":`, e.Target)
	b = optString(b, `,"observed":`, e.Observed)
	b = optString(b, `,"by":`, e.By)
	if e.Intended != 0 {
		b = append(b, `,"intended":`...)
		b = strconv.AppendInt(b, e.Intended, 10)
	}
	if e.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, e.Attempt, 10)
	}
	b = optString(b, `,"outcome":`, e.Outcome)
	if len(e.Meta) > 0 {
		b = append(b, `,"meta":`...)
		b = appendRaw(b, e.Meta)
	}
	return append(b, '}')
}

func optString(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(append(b, key...), v)
}

// plain reports whether s needs no escaping (printable ASCII without the
// characters encoding/json escapes).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func appendString(b []byte, s string) []byte {
	if plain(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, err := json.Marshal(s) // the rare string with escapes: encoding/json's own rules
	if err != nil {
		return append(b, `""`...) // a Go string always marshals
	}
	return append(b, q...)
}

// appendRaw appends a raw JSON value compacted, as encoding/json does.
func appendRaw(b []byte, raw json.RawMessage) []byte {
	q, err := json.Marshal(raw)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, q...)
}

// errSlow sends a line to the general decoder.
var errSlow = errors.New("not in the fast path")

// Decoder decodes events from JSON lines and validates them: it is the one
// place that says which lines are events (checker/MODEL.md §1). It keeps
// the strings it has seen (client names, keys, operation names), so that a
// long history allocates little; it is not safe for concurrent use.
type Decoder struct {
	interned map[string]string
	// Control names marks of a stream's own (a worker's ready, tick,
	// report, stopped) that are accepted besides the record's marks; they
	// never reach a history.
	Control map[string]bool
}

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder { return &Decoder{interned: map[string]string{}} }

// Decode fills e from one JSON object and validates it. Lines of the shape
// AppendJSON writes are parsed by hand; anything else (escapes, spacing,
// null, false) goes through encoding/json with unknown fields refused. The
// two accept exactly the same lines and give the same events (FuzzDecoders
// compares them).
func (d *Decoder) Decode(line []byte, e *Event) error {
	if err := d.decode(line, e); err != nil {
		return err
	}
	if e.Type == Mark && d.Control[e.F] {
		return nil
	}
	return e.validate()
}

// decode parses a line without validating the event.
func (d *Decoder) decode(line []byte, e *Event) error {
	*e = Event{}
	if err := d.fast(line, e); err == nil {
		return nil
	}
	*e = Event{}
	return slow(line, e)
}

// fields are the JSON names of Event's fields, exactly.
var fields = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeOf(Event{})
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		m[name] = true
	}
	return m
}()

// slow is the general decoder: encoding/json, with every key one of
// Event's own names exactly (encoding/json alone would also take "T" for
// "t") and nothing after the object.
func slow(line []byte, e *Event) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(line, &keys); err != nil {
		return err
	}
	for k, v := range keys {
		if !fields[k] {
			return fmt.Errorf("unknown field %q", k)
		}
		if string(v) == "null" {
			return fmt.Errorf("field %q is null: leave a field out to say it has no value", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(e); err != nil {
		return err
	}
	return nil
}

func (d *Decoder) intern(b []byte) string {
	if s, ok := d.interned[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(d.interned) < 1<<16 {
		d.interned[s] = s
	}
	return s
}

// fast parses the exact shape AppendJSON writes: an object with no
// spacing, known keys, integers without sign where none may be, plain
// strings, true flags and a valid meta. Anything else is errSlow: the
// general decoder decides.
func (d *Decoder) fast(b []byte, e *Event) error {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return errSlow
	}
	i := 1
	if i == len(b)-1 {
		return errSlow // {}
	}
	for {
		if b[i] != '"' {
			return errSlow
		}
		j := bytes.IndexByte(b[i+1:], '"')
		if j < 0 {
			return errSlow
		}
		key := b[i+1 : i+1+j]
		i += j + 2
		if i >= len(b) || b[i] != ':' {
			return errSlow
		}
		i++
		var err error
		switch string(key) {
		case "t":
			e.T, i, err = num(b, i, true)
		case "token":
			var v int64
			v, i, err = num(b, i, false) // unsigned: no sign
			e.Token = uint64(v)
		case "intended":
			e.Intended, i, err = num(b, i, true)
		case "attempt":
			e.Attempt, i, err = num(b, i, true)
		case "outcome":
			var s []byte
			s, i, err = str(b, i)
			e.Outcome = d.intern(s)
		case "type":
			var s []byte
			s, i, err = str(b, i)
			e.Type = Type(d.intern(s))
		case "f":
			var s []byte
			s, i, err = str(b, i)
			e.F = d.intern(s)
		case "proc", "key", "fenced", "fault", "target", "by":
			var s []byte
			s, i, err = str(b, i)
			v := d.intern(s)
			switch key[0] {
			case 'p':
				e.Proc = v
			case 'k':
				e.Key = v
			case 'f':
				if key[1] == 'e' {
					e.Fenced = v
				} else {
					e.Fault = v
				}
			case 't':
				e.Target = v
			case 'b':
				e.By = v
			}
		case "err", "observed":
			var s []byte
			s, i, err = str(b, i)
			if key[0] == 'e' {
				e.Err = string(s)
			} else {
				e.Observed = string(s)
			}
		case "lost", "reuse", "late":
			if !bytes.HasPrefix(b[i:], []byte("true")) {
				return errSlow
			}
			i += 4
			switch key[1] {
			case 'o':
				e.Lost = true
			case 'e':
				e.Reuse = true
			case 'a':
				e.Late = true
			}
		case "meta":
			var end int
			end, err = skipValue(b, i)
			if err == nil {
				if !json.Valid(b[i:end]) {
					return errSlow
				}
				e.Meta = append(json.RawMessage(nil), b[i:end]...)
				i = end
			}
		default:
			return errSlow
		}
		if err != nil {
			return errSlow
		}
		switch {
		case i == len(b)-1:
			return nil // at the closing brace
		case i >= len(b) || b[i] != ',' || i+1 >= len(b)-1:
			return errSlow
		}
		i++
	}
}

// num parses a JSON integer at b[i:] (a minus sign only when signed), as
// JSON writes it: no leading zero, no fraction, no exponent.
func num(b []byte, i int, signed bool) (int64, int, error) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		if !signed {
			return 0, i, errSlow
		}
		i++
	}
	start := i
	var v int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if v > (1<<63-1)/10 {
			return 0, i, errSlow
		}
		v = v*10 + int64(b[i]-'0')
		if v < 0 {
			return 0, i, errSlow
		}
		i++
	}
	if i == start || (i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E')) || (b[start] == '0' && i-start > 1) {
		return 0, i, errSlow
	}
	if neg {
		v = -v
	}
	return v, i, nil
}

// str returns the bytes of a string without escapes at b[i:].
func str(b []byte, i int) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, errSlow
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, nil
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, j, errSlow
		}
	}
	return nil, i, errSlow
}

// skipValue returns the end of the JSON object or array starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) || (b[i] != '{' && b[i] != '[') {
		return i, errSlow
	}
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			for j++; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return i, fmt.Errorf("unterminated value")
}
