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
	const ok = `{"t":1,"type":"invoke","f":"acquire","proc":"a","key":"k"}` + "\n"
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
