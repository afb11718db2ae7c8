package verdict

import (
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/lockbench/lockbench/history"
)

// digest hashes the events of one case (one lane), so that a trial given
// twice — a history written twice into one file, a run's folder copied —
// is known for the same trial (MODEL §18, A5): a copy adds no evidence.
// Two trials of real runs never share one: their clocks differ.
type digest struct {
	h   hash.Hash64
	buf []byte
}

func newDigest(lane int) *digest {
	d := &digest{h: fnv.New64a()}
	d.buf = binary.AppendVarint(d.buf[:0], int64(lane))
	d.h.Write(d.buf)
	return d
}

// add hashes one event the case (the lane) was fed.
func (d *digest) add(e *history.Event) {
	b := d.buf[:0]
	b = binary.AppendVarint(b, e.T)
	b = binary.AppendUvarint(b, e.Token)
	b = binary.AppendVarint(b, e.Intended)
	var flags byte
	for i, f := range []bool{e.Lost, e.Reuse, e.Late} {
		if f {
			flags |= 1 << i
		}
	}
	b = append(b, flags)
	for _, s := range []string{string(e.Type), e.F, e.Proc, e.Key, e.Err, e.Fenced, e.Fault, e.Target, e.Observed, string(e.Meta)} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	d.buf = b
	d.h.Write(b)
}

// sum is the digest as written in a case summary.
func (d *digest) sum() string { return fmt.Sprintf("%016x", d.h.Sum64()) }
