package threshold

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		src    string
		metric string
		op     string
		value  float64
		err    string
	}{
		{"acquire_p99 < 50ms", "acquire_p99", "<", 50, ""},
		{"acquire_p99<2s", "acquire_p99", "<", 2000, ""},
		{"acquire_max <= 1500us", "acquire_max", "<=", 1.5, ""},
		{"violations == 0", "violations", "==", 0, ""},
		{"stale_writes_accepted==0", "stale_writes_accepted", "==", 0, ""},
		{"throughput > 500/s", "throughput", ">", 500, ""},
		{"throughput >= 12.5", "throughput", ">=", 12.5, ""},
		{"lost_updates != 3", "lost_updates", "!=", 3, ""},
		{"longest_gap < 1m", "longest_gap", "<", 60000, ""},
		{"handoff_p99 < 20ms", "handoff_p99", "<", 20, ""},
		// errors
		{"", "", "", 0, "want <metric> <op> <value>"},
		{"< 5ms", "", "", 0, "want <metric> <op> <value>"},
		{"acquire_p99", "", "", 0, "want <metric> <op> <value>"},
		{"acquire_p99 =< 5ms", "", "", 0, "unknown operator"},
		{"acquire_p100 < 5ms", "", "", 0, `unknown metric "acquire_p100"`},
		{"violatons == 0", "", "", 0, `unknown metric "violatons"`},
		{"acquire_p99 < 50", "", "", 0, "give a unit"},
		{"acquire_p99 < 50kg", "", "", 0, "not a duration unit"},
		{"acquire_p99 < fast", "", "", 0, "is not a number"},
		{"throughput > 500ms", "", "", 0, "write it as N/s"},
		{"violations == 0ms", "", "", 0, "takes no unit"},
		{"violations == NaN", "", "", 0, "is not a number"},
		{"violations == Inf", "", "", 0, "is not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			got, err := Parse(tt.src)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Metric != tt.metric || got.Op != tt.op || got.Value != tt.value {
				t.Errorf("got %+v", got)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	for _, tt := range []struct {
		src      string
		observed float64
		pass     bool
		show     string
	}{
		{"acquire_p99 < 50ms", 31.2, true, "✓ 'acquire_p99 < 50ms' acquire_p99=31.2ms"},
		{"acquire_p99 < 30ms", 31.2, false, "✗ 'acquire_p99 < 30ms' acquire_p99=31.2ms"},
		{"violations == 0", 2, false, "✗ 'violations == 0' violations=2"},
		{"throughput > 500/s", 480.4, false, "✗ 'throughput > 500/s' throughput=480.4/s"},
		{"throughput >= 480.4/s", 480.4000001, true, "✓ 'throughput >= 480.4/s' throughput=480.4/s"},
		{"lost_updates != 3", 3, false, "✗ 'lost_updates != 3' lost_updates=3"},
	} {
		th, err := Parse(tt.src)
		if err != nil {
			t.Fatal(err)
		}
		v := th.Judge(tt.observed)
		if v.Pass != tt.pass || v.String() != tt.show {
			t.Errorf("%s: pass=%v %q, want %v %q", tt.src, v.Pass, v.String(), tt.pass, tt.show)
		}
	}
}
