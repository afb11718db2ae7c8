package threshold

import (
	"strings"
	"testing"
)

// FuzzParse: any text either parses into a threshold on a known metric
// that prints back, or is an error; never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"acquire_p99 < 50ms", "violations == 0", "throughput > 500/s", "longest_gap<=1m", "x", "a<", "<1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		th, err := Parse(src)
		if err != nil {
			return
		}
		if _, ok := Lookup(th.Metric); !ok {
			t.Fatalf("%q parsed with unknown metric %q", src, th.Metric)
		}
		if v := th.Judge(th.Value); !strings.Contains(v.String(), th.Metric) {
			t.Fatalf("verdict %q does not name its metric", v.String())
		}
	})
}
