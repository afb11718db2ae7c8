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
