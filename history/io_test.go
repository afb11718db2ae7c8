package history

import (
	"bytes"
	"strings"
	"testing"
)

func readAll(t *testing.T, in string) ([]Event, *Reader) {
	t.Helper()
	r := NewReader(strings.NewReader(in), "h.jsonl")
	var out []Event
	for r.Next() {
		out = append(out, *r.Event())
	}
	return out, r
}

func TestReaderRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	in := []Event{
		{T: 1, Type: Invoke, F: OpAcquire, Proc: "i1c0", Key: "k0"},
		{T: 2, Type: OK, F: OpAcquire, Proc: "i1c0", Key: "k0", Token: 7},
		{T: 3, Type: Mark, F: MarkResWrite, Proc: "i1c0", Key: "k0", Token: 7, Lost: true, Fenced: FencedRejected},
	}
	for i := range in {
		if err := w.Write(&in[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got, r := readAll(t, buf.String())
	if r.Err() != nil || r.Truncated() != "" {
		t.Fatalf("err=%v truncated=%q", r.Err(), r.Truncated())
	}
	if len(got) != len(in) {
		t.Fatalf("read %d events, want %d", len(got), len(in))
	}
	for i := range in {
		if got[i].T != in[i].T || got[i].F != in[i].F || got[i].Token != in[i].Token || got[i].Fenced != in[i].Fenced || got[i].Lost != in[i].Lost {
			t.Errorf("event %d = %+v, want %+v", i, got[i], in[i])
		}
	}
}

func TestReaderBadInput(t *testing.T) {
	const ok = `{"t":1,"type":"invoke","f":"acquire","proc":"i1c0","key":"k"}` + "\n"
	tests := []struct {
		name, in  string
		events    int
		errSub    string // "" means no error
		truncated bool
	}{
		{"empty", "", 0, "", false},
		{"blank lines", "\n\n" + ok + "\n", 1, "", false},
		{"truncated last line is skipped", ok + `{"t":2,"type":"o`, 1, "", true},
		{"garbage in the middle", ok + "not json\n" + ok, 1, "h.jsonl:2: not a history event", false},
		{"garbage complete last line", ok + "{]\n", 1, "h.jsonl:2", false},
		{"unknown type", `{"t":1,"type":"maybe","f":"acquire"}` + "\n", 0, `unknown event type "maybe"`, false},
		{"no type", `{"t":1,"f":"acquire"}` + "\n", 0, "no type", false},
		{"no f", `{"t":1,"type":"ok"}` + "\n", 0, "no f", false},
		{"negative time", `{"t":-5,"type":"ok","f":"acquire"}` + "\n", 0, "negative time", false},
		{"binary junk", "\x00\x01\x02\n", 0, "h.jsonl:1", false},
		// issue 41: a line too long to read is refused with its number.
		{"a line over MaxLine", ok + ok + strings.Repeat("x", MaxLine+1) + "\n" + ok, 2, "h.jsonl:3: a line longer than 16 MiB", false},
		// MODEL §1: one language, whichever decoder reads the line.
		{"negative token", `{"t":1,"type":"ok","f":"acquire","proc":"i1c0","key":"k","token":-1}` + "\n", 0, "h.jsonl:1", false},
		{"fractional token", `{"t":1,"type":"ok","f":"acquire","proc":"i1c0","key":"k","token":1.5}` + "\n", 0, "h.jsonl:1", false},
		{"token as a string", `{"t":1,"type":"ok","f":"acquire","proc":"i1c0","key":"k","token":"7"}` + "\n", 0, "h.jsonl:1", false},
		{"token above 2^64-1", `{"t":1,"type":"ok","f":"acquire","proc":"i1c0","key":"k","token":18446744073709551616}` + "\n", 0, "h.jsonl:1", false},
		{"negative token, slow path", `{"t":1,"type":"ok","f":"acquire","proc":"i1c0","key":"k","err":"\u00e9","token":-1}` + "\n", 0, "h.jsonl:1", false},
		{"leading zero", `{"t":01,"type":"ok","f":"acquire","proc":"i1c0","key":"k"}` + "\n", 0, "h.jsonl:1", false},
		{"unknown field", `{"t":1,"type":"ok","f":"acquire","proc":"i1c0","key":"k","tokn":3}` + "\n", 0, `unknown field "tokn"`, false},
		{"a field in other case", `{"T":1,"type":"ok","f":"acquire","proc":"i1c0","key":"k"}` + "\n", 0, `unknown field "T"`, false},
		{"unknown operation", `{"t":1,"type":"ok","f":"acqiure","proc":"i1c0","key":"k"}` + "\n", 0, `unknown operation "acqiure"`, false},
		{"unknown mark", `{"t":1,"type":"mark","f":"case-begin"}` + "\n", 0, `unknown mark "case-begin"`, false},
		{"lost as an invoke", `{"t":1,"type":"invoke","f":"lost","proc":"i1c0","key":"k"}` + "\n", 0, "lost cannot be of type invoke", false},
		{"not a client", `{"t":1,"type":"invoke","f":"acquire","proc":"a","key":"k"}` + "\n", 0, "not a client", false},
		{"no key", `{"t":1,"type":"invoke","f":"acquire","proc":"i1c0"}` + "\n", 0, "has no key", false},
		{"trailing comma", `{"t":1,"type":"mark","f":"case-end",}` + "\n", 0, "h.jsonl:1", false},
		{"bad meta", `{"t":1,"type":"mark","f":"case-start","meta":{"a":}}` + "\n", 0, "h.jsonl:1", false},
		{"max token", `{"t":1,"type":"ok","f":"acquire","proc":"i1c0","key":"k","token":18446744073709551615}` + "\n", 1, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, r := readAll(t, tt.in)
			if len(got) != tt.events {
				t.Errorf("events = %d, want %d", len(got), tt.events)
			}
			if tt.errSub == "" && r.Err() != nil {
				t.Errorf("unexpected error %v", r.Err())
			}
			if tt.errSub != "" && (r.Err() == nil || !strings.Contains(r.Err().Error(), tt.errSub)) {
				t.Errorf("error = %v, want one containing %q", r.Err(), tt.errSub)
			}
			if (r.Truncated() != "") != tt.truncated {
				t.Errorf("truncated = %q, want %v", r.Truncated(), tt.truncated)
			}
		})
	}
}
