package suggest

import "testing"

func TestClosest(t *testing.T) {
	cands := []string{"run", "check", "list", "table", "compare", "validate", "report", "perf"}
	for _, tc := range []struct{ in, want string }{
		{"run", "run"},
		{"rnu", "run"},    // swap
		{"chek", "check"}, // deletion
		{"compre", "compare"},
		{"valdiate", "validate"},
		{"val", "validate"}, // prefix
		{"xyz", ""},         // nothing close
		{"report", "report"},
		{"REPORT", "report"},
		{"etcd", ""},
	} {
		if got := Closest(tc.in, cands); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if h := Hint("etdc", []string{"etcd", "consul"}); h != ` (did you mean "etcd"?)` {
		t.Errorf("Hint = %q", h)
	}
	if h := Hint("etcd", []string{"etcd"}); h != "" {
		t.Errorf("Hint of an exact name = %q, want none", h)
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"ab", "ba", 1}, {"kitten", "sitting", 3}, {"duration", "durations", 1}} {
		if got := distance(tc.a, tc.b); got != tc.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
