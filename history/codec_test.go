package history

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

func randomEvent(r *rand.Rand) Event {
	strs := []string{"", "i1c0", "k0", "acquire", "plain text", `with "quotes"`, "tab\there", "<html>&", "ünïcödé", "\u2028", "back\\slash", "\x01"}
	pick := func() string { return strs[r.IntN(len(strs))] }
	e := Event{T: r.Int64N(1 << 40), Type: []Type{Invoke, OK, Fail, Unsent, Info, Mark}[r.IntN(6)], F: pick(), Proc: pick(), Key: pick(),
		Err: pick(), Fenced: pick(), Fault: pick(), Target: pick(), Observed: pick(), By: pick()}
	if r.IntN(3) == 0 {
		e.Attempt, e.Outcome = r.Int64N(1<<20), pick()
	}
	if r.IntN(2) == 0 {
		e.Token = r.Uint64N(1 << 50)
	}
	if r.IntN(3) == 0 {
		e.Intended = r.Int64N(1 << 40)
	}
	e.Lost, e.Reuse, e.Late = r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0
	if r.IntN(4) == 0 {
		e.Meta = json.RawMessage(`{"name":"x","faults":[{"a":1}],"s":"}{"}`)
	}
	return e
}

// TestCodecMatchesEncodingJSON: AppendJSON writes what encoding/json
// writes, and Decode reads back what was written, for events with every
// field and awkward strings.
func TestCodecMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	d := NewDecoder()
	for i := 0; i < 20000; i++ {
		e := randomEvent(r)
		want, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendJSON(nil, &e)
		if string(got) != string(want) {
			t.Fatalf("AppendJSON:\n got %s\nwant %s", got, want)
		}
		var back Event
		if err := d.decode(got, &back); err != nil {
			t.Fatalf("Decode(%s): %v", got, err)
		}
		var ref Event
		json.Unmarshal(want, &ref)
		if !reflect.DeepEqual(back, ref) {
			t.Fatalf("Decode(%s):\n got %+v\nwant %+v", got, back, ref)
		}
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	e := Event{T: 123456789, Type: OK, F: OpAcquire, Proc: "i1c12", Key: "k17", Token: 4242}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = AppendJSON(buf[:0], &e)
	}
}

func BenchmarkDecode(b *testing.B) {
	e := Event{T: 123456789, Type: OK, F: OpAcquire, Proc: "i1c12", Key: "k17", Token: 4242}
	line := AppendJSON(nil, &e)
	d := NewDecoder()
	var out Event
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := d.Decode(line, &out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEncodingJSON(b *testing.B) {
	e := Event{T: 123456789, Type: OK, F: OpAcquire, Proc: "i1c12", Key: "k17", Token: 4242}
	line := AppendJSON(nil, &e)
	var out Event
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		out = Event{}
		if err := json.Unmarshal(line, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUnsent: unsent is a completion of every operation that has
// completions (checker/MODEL.md §1), and of no notification or mark; both
// decoders read it alike.
func TestUnsent(t *testing.T) {
	d := NewDecoder()
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{`{"t":3,"type":"unsent","f":"acquire","proc":"i1c0","key":"k0","err":"dial tcp: connection refused"}`, true},
		{`{"t":3,"type":"unsent","f":"release","proc":"i1c0","key":"k0"}`, true},
		{`{"t":3,"type":"unsent","f":"extend","proc":"i1c0","key":"k0"}`, true},
		{`{"t":3,"type":"unsent","f":"release-wrong-token","proc":"i1c0","key":"k0"}`, true},
		{`{"t":3,"type":"unsent","f":"store","proc":"i1c0","key":"k0"}`, true},
		{`{"t":3,"type":"unsent","f":"lost","proc":"i1c0","key":"k0"}`, false},
		{`{"t":3,"type":"unsent","f":"dropped","proc":"i1"}`, false},
		{`{"t":3,"type":"unsent","f":"resource","proc":"i1c0","key":"k0"}`, false},
		{`{"t":3,"type":"unsent","f":"case-end"}`, false},
	} {
		var fast, gen, got Event
		ferr, gerr := d.fast([]byte(c.line), &fast), slow([]byte(c.line), &gen)
		if ferr != nil || gerr != nil || !reflect.DeepEqual(fast, gen) {
			t.Errorf("%s: fast %+v (%v), general %+v (%v)", c.line, fast, ferr, gen, gerr)
		}
		err := d.Decode([]byte(c.line), &got)
		if (err == nil) != c.ok {
			t.Errorf("%s: Decode says %v, want accepted %v", c.line, err, c.ok)
		}
		if err == nil && got.Type != Unsent {
			t.Errorf("%s: type %q", c.line, got.Type)
		}
	}
}

// TestJobEventsValidate: the job record's rules (MODEL §1, §20).
func TestJobEventsValidate(t *testing.T) {
	d := NewDecoder()
	for line, ok := range map[string]bool{
		`{"t":1,"type":"invoke","f":"job","proc":"i1c0","key":"j0","attempt":1}`:                           true,
		`{"t":1,"type":"invoke","f":"job","proc":"i1c0","key":"j0"}`:                                       false, // no attempt
		`{"t":1,"type":"fail","f":"effect","proc":"i1c0","key":"j0","attempt":2,"outcome":"duplicate"}`:    true,
		`{"t":1,"type":"mark","f":"sink-effect","proc":"i1c0","key":"j0","attempt":1,"outcome":"applied"}`: true,
		`{"t":1,"type":"mark","f":"sink-effect","proc":"i1c0","key":"j0","attempt":1}`:                     false, // no outcome
		`{"t":1,"type":"mark","f":"sink-effect","proc":"i1","key":"j0","attempt":1,"outcome":"applied"}`:   false, // not a client
		`{"t":1,"type":"ok","f":"effect","proc":"i1c0","key":"j0","attempt":1,"outcome":"twice"}`:          false,
		`{"t":1,"type":"ok","f":"effect","proc":"i1c0","key":"j0","attempt":-1}`:                           false,
	} {
		var e Event
		if err := d.Decode([]byte(line), &e); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok %v", line, err, ok)
		}
	}
}
