package history

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzReader: any bytes are read event by event, or stop with an error
// naming a line; never a panic, and every event returned is valid.
func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"t":0,"type":"mark","f":"case-start","meta":{"name":"x"}}` + "\n" + `{"t":1,"type":"invoke","f":"acquire","proc":"i1c0","key":"k0"}` + "\n"))
	f.Add([]byte(`{"t":1,"type":"ok","f":"acquire"`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b), "fuzz")
		for r.Next() {
			if err := r.Event().validate(); err != nil {
				t.Fatalf("invalid event returned: %v", err)
			}
		}
		if err := r.Err(); err != nil && !bytes.Contains([]byte(err.Error()), []byte("fuzz:")) {
			t.Fatalf("error without location: %v", err)
		}
	})
}

// FuzzDecoders: the hand-written fast path and the general decoder accept
// exactly the same lines and give the same events (checker/MODEL.md §1).
// Whenever the fast path accepts a line, the general decoder must accept
// it too, with an equal event; Decode is then what the general decoder
// says, validated.
func FuzzDecoders(f *testing.F) {
	for _, s := range []string{
		`{"t":1,"type":"ok","f":"acquire","proc":"i1c0","key":"k0","token":7}`,
		`{"t":1,"type":"ok","f":"acquire","proc":"i1c0","key":"k0","token":-1}`,
		`{"t":3,"type":"unsent","f":"extend","proc":"i1c0","key":"k0","err":"dial tcp: connection refused"}`,
		`{"t":3,"type":"unsent","f":"lost","proc":"i1c0","key":"k0"}`,
		`{"t":01,"type":"mark","f":"case-end"}`,
		`{,"t":1,"type":"mark","f":"case-end"}`,
		`{"t":1,"type":"mark","f":"case-end",}`,
		`{"t":0,"type":"mark","f":"case-start","meta":{"name":"x","faults":[{"a":1}]}}`,
		`{"t":0,"type":"mark","f":"case-start","meta":{"a":}}`,
		`{"t":2,"type":"mark","f":"res-write","proc":"i1c0","key":"k0","lost":true,"fenced":"stale","late":true}`,
		`{"t":9223372036854775807,"type":"ok","f":"acquire","proc":"i1c0","key":"k","token":18446744073709551615}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d := NewDecoder()
		var fast, gen Event
		ferr := d.fast(line, &fast)
		gerr := slow(line, &gen)
		if ferr == nil {
			if gerr != nil {
				t.Fatalf("fast path accepted %q, the general decoder refused it: %v", line, gerr)
			}
			if !reflect.DeepEqual(normal(fast), normal(gen)) {
				t.Fatalf("%q: fast %+v, general %+v", line, fast, gen)
			}
		}
		var got Event
		err := d.Decode(line, &got)
		switch {
		case gerr != nil && err == nil:
			t.Fatalf("Decode accepted %q, which the general decoder refuses (%v)", line, gerr)
		case gerr == nil && (err == nil) != (gen.validate() == nil):
			t.Fatalf("Decode(%q) = %v, but validation of the general decoder's event says %v", line, err, gen.validate())
		case err == nil && !reflect.DeepEqual(normal(got), normal(gen)):
			t.Fatalf("%q: Decode %+v, general %+v", line, got, gen)
		}
	})
}

// normal makes two events comparable: meta compacted.
func normal(e Event) Event {
	if len(e.Meta) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, e.Meta) == nil {
			e.Meta = b.Bytes()
		}
	}
	return e
}
