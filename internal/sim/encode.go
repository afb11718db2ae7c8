package sim

import (
	"strconv"
)

// Event is one line of a history, as this package writes it. It is the
// simulator's own copy of the record format (MODEL §1): the encoder below
// writes it by hand, so that the checker's decoder is tested against an
// independent writer.
type Event struct {
	T        int64
	Type     string
	F        string
	Proc     string
	Key      string
	Token    uint64
	Err      string
	Lost     bool
	Fenced   string
	Reuse    bool
	Late     bool
	Fault    string
	Target   string
	Observed string
	Intended int64
	Meta     []byte // a JSON object, already encoded
	// TokenZero writes "token":0 (none, MODEL §1) instead of leaving it out.
	TokenZero bool
	// Raw, when set, is written instead of the encoded event (a line the
	// checker must refuse, MODEL §1).
	Raw string
}

// AppendJSON appends the event's JSON object (no newline).
func (e *Event) AppendJSON(b []byte) []byte {
	if e.Raw != "" {
		return append(b, e.Raw...)
	}
	o := newObj(b)
	o.Int("t", e.T)
	o.Str("type", e.Type)
	o.Str("f", e.F)
	if e.Proc != "" {
		o.Str("proc", e.Proc)
	}
	if e.Key != "" {
		o.Str("key", e.Key)
	}
	if e.Token != 0 || e.TokenZero {
		o.Uint("token", e.Token)
	}
	if e.Err != "" {
		o.Str("err", e.Err)
	}
	if e.Lost {
		o.Bool("lost", true)
	}
	if e.Fenced != "" {
		o.Str("fenced", e.Fenced)
	}
	if e.Reuse {
		o.Bool("reuse", true)
	}
	if e.Late {
		o.Bool("late", true)
	}
	if e.Fault != "" {
		o.Str("fault", e.Fault)
	}
	if e.Target != "" {
		o.Str("target", e.Target)
	}
	if e.Observed != "" {
		o.Str("observed", e.Observed)
	}
	if e.Intended != 0 {
		o.Int("intended", e.Intended)
	}
	if e.Meta != nil {
		o.Raw("meta", e.Meta)
	}
	return o.End()
}

// obj writes one JSON object field by field.
type obj struct {
	b []byte
	n int
}

func newObj(b []byte) *obj { return &obj{b: append(b, '{')} }

func (o *obj) field(k string) {
	if o.n > 0 {
		o.b = append(o.b, ',')
	}
	o.n++
	o.b = appendString(o.b, k)
	o.b = append(o.b, ':')
}

func (o *obj) Str(k, v string) *obj { o.field(k); o.b = appendString(o.b, v); return o }
func (o *obj) Int(k string, v int64) *obj {
	o.field(k)
	o.b = strconv.AppendInt(o.b, v, 10)
	return o
}
func (o *obj) Uint(k string, v uint64) *obj {
	o.field(k)
	o.b = strconv.AppendUint(o.b, v, 10)
	return o
}
func (o *obj) Bool(k string, v bool) *obj { o.field(k); o.b = strconv.AppendBool(o.b, v); return o }

// Float writes a decimal fraction (harness figures are fractions of cores).
func (o *obj) Float(k string, v float64) *obj {
	o.field(k)
	o.b = strconv.AppendFloat(o.b, v, 'f', -1, 64)
	return o
}
func (o *obj) Raw(k string, v []byte) *obj { o.field(k); o.b = append(o.b, v...); return o }
func (o *obj) End() []byte                 { return append(o.b, '}') }

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// appendStrings appends a JSON array of strings.
func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}
