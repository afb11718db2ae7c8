package jobs

import (
	"reflect"
	"testing"
)

// TestEveryStrategyIsDocumented fails on a strategy without a summary or
// with an option without a doc tag: bench list and docs/jobs.md show them.
func TestEveryStrategyIsDocumented(t *testing.T) {
	if len(All()) < 6 {
		t.Fatalf("%d strategies registered, want the six of docs/jobs.md", len(All()))
	}
	for _, info := range All() {
		if info.Summary == "" {
			t.Errorf("strategy %s has no summary", info.Name)
		}
		if info.Options == nil {
			continue
		}
		ty := reflect.TypeOf(info.Options)
		for i := 0; i < ty.NumField(); i++ {
			if f := ty.Field(i); f.Tag.Get("doc") == "" || f.Tag.Get("yaml") == "" {
				t.Errorf("strategy %s: option %s has no yaml or doc tag", info.Name, f.Name)
			}
		}
	}
}

// TestLikePrefix keeps a prefix's own LIKE characters literal.
func TestLikePrefix(t *testing.T) {
	for in, want := range map[string]string{"": "%", "c1-": "c1-%", "a_b%c\\": `a\_b\%c\\%`} {
		if got := likePrefix(in); got != want {
			t.Errorf("likePrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStrategyOptions refuses an unknown option and a bad visibility.
func TestStrategyOptions(t *testing.T) {
	if _, err := New("skip-locked-visibility", func(v any) error {
		v.(*VisibilityOptions).Visibility = -1
		return nil
	}); err == nil {
		t.Error("a negative visibility timeout was accepted")
	}
	if _, err := New("nope", func(any) error { return nil }); err == nil {
		t.Error("an unknown strategy was accepted")
	}
	s, err := New("lock", func(any) error { return nil })
	if err != nil || !TakesLock(s) {
		t.Errorf("lock: %v, takes lock %v", err, s != nil && TakesLock(s))
	}
}

// TestBrokerAndLeaderOptions refuses a broker's bad timing and names the
// servers and abilities each strategy declares.
func TestBrokerAndLeaderOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(v any)
	}{
		{"nats", func(v any) { v.(*NATSOptions).AckWait = 0 }},
		{"nats", func(v any) { v.(*NATSOptions).MaxDeliver = -2 }},
		{"nats", func(v any) { v.(*NATSOptions).Duplicates = -1 }},
		{"redis-streams", func(v any) { v.(*StreamsOptions).MinIdle = 0 }},
	} {
		if _, err := New(tc.name, func(v any) error { tc.set(v); return nil }); err == nil {
			t.Errorf("%s: a bad option was accepted", tc.name)
		}
	}
	for name, want := range map[string]string{"nats": NATSServer, "redis-streams": StreamsServer, "idempotency-key": ""} {
		s, err := New(name, func(any) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if sv := Servers(s); len(sv) == 1 {
			got = sv[0].Name
		}
		_, publishes := s.(Publisher)
		if got != want || publishes != (want != "") {
			t.Errorf("%s: servers %v, publisher %v; want %q", name, Servers(s), publishes, want)
		}
	}
	s, err := New("leader", func(any) error { return nil })
	if err != nil || !Elects(s) || TakesLock(s) {
		t.Errorf("leader: %v, elects %v, takes the lock %v", err, s != nil && Elects(s), s != nil && TakesLock(s))
	}
	if info, _ := Lookup("leader"); !info.Elects || info.Lock {
		t.Errorf("leader's info: elects %v lock %v", info.Elects, info.Lock)
	}
}

// TestNATSNames keeps the characters of a case's prefix that NATS names
// cannot hold out of its stream and subject.
func TestNATSNames(t *testing.T) {
	for prefix, want := range map[string][2]string{
		"":                    {"LOCKBENCH_JOBS", "lockbench.jobs"},
		"c2-":                 {"LOCKBENCH_JOBSc2-", "lockbench.jobsc2-"},
		"lockbench-x.y*z>-a-": {"LOCKBENCH_JOBSlockbench-x_y_z_-a-", "lockbench.jobslockbench-x_y_z_-a-"},
	} {
		if st, sub := natsNames(prefix); st != want[0] || sub != want[1] {
			t.Errorf("natsNames(%q) = %q, %q; want %q", prefix, st, sub, want)
		}
	}
}
