package sim

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/verdict"
)

// MODEL §1 against the checker's decoder, line by line: every line of
// badLines is refused, naming its line; the edges of the language (a
// fault group, "token":0, blank lines, the largest token and time) are
// accepted.

func smallHistory(extra string, at int) string {
	lines := []string{
		`{"t":1000,"type":"mark","f":"case-start","meta":{"name":"d","backend":"sim","fenced":true,"duration_ns":1000,"expect":{},"faults":[{"name":"p1","type":"partition","target":"link:srv-1","at_ns":5,"for_ns":10,"group":"g"}],"clients":1,"keys":1}}`,
		`{"t":1010,"type":"invoke","f":"acquire","proc":"i1c0","key":"k0"}`,
		`{"t":1011,"type":"ok","f":"acquire","proc":"i1c0","key":"k0","token":18446744073709551615}`,
		`{"t":1012,"type":"mark","f":"fault-start","fault":"p1","target":"link:srv-1"}`,
		`{"t":1013,"type":"invoke","f":"release","proc":"i1c0","key":"k0"}`,
		`{"t":1014,"type":"ok","f":"release","proc":"i1c0","key":"k0"}`,
		`{"t":1015,"type":"mark","f":"fault-end","fault":"p1","target":"link:srv-1"}`,
		`{"t":2001,"type":"mark","f":"case-stop"}`,
		`{"t":9223372036854775807,"type":"mark","f":"case-end"}`,
	}
	if extra != "" {
		lines = append(lines[:at], append([]string{extra}, lines[at:]...)...)
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestDecoderRefusesBadLines(t *testing.T) {
	for _, b := range badLines(1012) {
		h := smallHistory(b[1], 3)
		_, err := verdict.Analyze(history.NewReader(strings.NewReader(h), "h.jsonl"))
		switch {
		case err == nil:
			t.Errorf("MODEL §1: %s accepted: %s", b[0], b[1])
		case !strings.Contains(err.Error(), ":4") && !strings.Contains(err.Error(), "line 4"):
			t.Errorf("MODEL §1: %s refused without its line (4): %v", b[0], err)
		}
	}
}

func TestDecoderAcceptsEdges(t *testing.T) {
	for name, h := range map[string]string{
		"group, token 0, largest token and time": smallHistory(`{"t":1012,"type":"ok","f":"acquire","proc":"i2c0","key":"k0","token":0}`, 3),
		"blank lines":                            strings.Replace(smallHistory("", 0), "\n", "\n\n", 3),
		"a last line cut short":                  smallHistory("", 0) + `{"t":9223372036854775807,"type":"ma`,
	} {
		s, err := verdict.Analyze(history.NewReader(bytes.NewReader([]byte(h)), "h.jsonl"))
		if err != nil {
			t.Errorf("%s: refused: %v", name, err)
			continue
		}
		if len(s.Cases) != 1 {
			t.Errorf("%s: %d cases", name, len(s.Cases))
		}
	}
}
