package verdict

import (
	"encoding/binary"
	"fmt"

	"github.com/lockbench/lockbench/history"
)

// digest identifies the events of one case (one lane), so that a trial
// given twice — a history written twice into one file, a run's folder
// copied — is known for the same trial (MODEL §18, A5): a copy adds no
// evidence. Two trials of real runs never share one: their clocks differ.
type digest uint64

func newDigest(lane int) digest { return digest(fold(0xcbf29ce484222325, uint64(lane))) }

// add folds in one event the case (the lane) was fed, by its eventHash.
func (d digest) add(h uint64) digest { return digest(fold(uint64(d), h)) }

// sum is the digest as written in a case summary.
func (d digest) sum() string { return fmt.Sprintf("%016x", uint64(d)) }

// mixK is the multiplier of the digest's multiply-xorshift hash: cheap
// beside the checker, and the same in every process (hash/maphash's seeds
// are random), so that digests of two runs' summaries compare.
const mixK = 0x9e3779b97f4a7c15

func fold(h, x uint64) uint64 {
	h = (h ^ x) * mixK
	return h ^ h>>32
}

// eventHash hashes every field of e. Analyze computes it on the goroutine
// that reads the history, off the judging path.
func eventHash(e *history.Event) uint64 {
	var arr [160]byte
	b := arr[:0]
	b = binary.AppendVarint(b, e.T)
	b = binary.AppendUvarint(b, e.Token)
	b = binary.AppendVarint(b, e.Intended)
	var flags byte
	if e.Lost {
		flags |= 1
	}
	if e.Reuse {
		flags |= 2
	}
	if e.Late {
		flags |= 4
	}
	b = append(b, flags)
	for _, s := range [...]string{string(e.Type), e.F, e.Proc, e.Key, e.Err, e.Fenced, e.Fault, e.Target, e.Observed} {
		b = append(append(b, byte(len(s)), byte(len(s)>>8)), s...)
	}
	b = append(b, e.Meta...)
	h := uint64(0x84222325cbf29ce4)
	for len(b) >= 8 {
		h = fold(h, binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	var t [8]byte
	copy(t[:], b)
	return fold(h, binary.LittleEndian.Uint64(t[:])^uint64(len(b))<<59)
}
