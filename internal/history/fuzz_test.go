package history

import (
	"bytes"
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
