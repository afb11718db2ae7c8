package driver

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestParseReplyGolden: every line in testdata/replies.txt, as a driver
// might write it, and what lockbench makes of it: the golden file is the
// list of refusals a driver author reads.
func TestParseReplyGolden(t *testing.T) {
	f, err := os.Open("testdata/replies.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		r, err := ParseReply([]byte(line))
		verdict := "ok: " + r.Type
		if err != nil {
			verdict = "refused: " + err.Error()
		}
		fmt.Fprintf(&b, "%s\n  %s\n", line, verdict)
	}
	got := b.String()
	const golden = "testdata/replies.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./backends/driver -run Golden -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("ParseReply's verdicts differ from %s (-update rewrites it):\n%s", golden, got)
	}
}

// FuzzParseReply: no line makes ParseReply panic, and what it accepts
// has a type a driver writes.
func FuzzParseReply(f *testing.F) {
	data, _ := os.ReadFile("testdata/replies.txt")
	for _, l := range strings.Split(string(data), "\n") {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseReply(line)
		if err == nil && !strings.Contains(" hello ok error lost bare ", " "+r.Type+" ") {
			t.Errorf("accepted type %q", r.Type)
		}
	})
}
