package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// injectedCut is a cut an outside injector keeps: it has no packet count,
// only the injector's record.
type injectedCut struct {
	record string
	err    error
}

func (c injectedCut) Packets() (int64, error) { return 0, errors.New("not counted here") }
func (c injectedCut) Undo() error             { return nil }
func (c injectedCut) InForce(context.Context) (string, error) {
	return c.record, c.err
}

// countedCut is one of lockbench's own rules, with its counter.
type countedCut int64

func (c countedCut) Packets() (int64, error) { return int64(c), nil }
func (c countedCut) Undo() error             { return nil }

// TestObserveRules: rules an injector keeps are seen by its record, every
// one of them, and never by a packet count lockbench does not have;
// lockbench's own rules by what they dropped.
func TestObserveRules(t *testing.T) {
	drops := func(n int64) (string, error) {
		if n == 0 {
			return "", &IdleError{"nothing"}
		}
		return fmt.Sprintf("dropped %d", n), nil
	}
	ctx := context.Background()
	if s, err := observeRules(ctx, []Cut{injectedCut{record: "in force on pod a"}, injectedCut{record: "in force on pod b"}}, drops); err != nil || !strings.Contains(s, "pod a") || !strings.Contains(s, "injector's record") {
		t.Errorf("two injected cuts in force: %q, %v", s, err)
	}
	if _, err := observeRules(ctx, []Cut{injectedCut{record: "ok"}, injectedCut{err: errors.New("recovered early")}}, drops); err == nil {
		t.Error("an injected cut no longer in force was observed")
	}
	if s, err := observeRules(ctx, []Cut{countedCut(3), countedCut(4)}, drops); err != nil || s != "dropped 7" {
		t.Errorf("own rules: %q, %v", s, err)
	}
	if _, err := observeRules(ctx, []Cut{countedCut(0)}, drops); !IsIdle(err) {
		t.Errorf("own rules that dropped nothing: %v, want idle", err)
	}
}

// TestEveryActionHasAVerb: messages name every action in words.
func TestEveryActionHasAVerb(t *testing.T) {
	for _, a := range Actions {
		if a.Verb() == string(a) && a != ActProxy {
			t.Errorf("action %s has no verb", a)
		}
	}
	if len(verbs) != len(Actions) {
		t.Errorf("%d verbs for %d actions", len(verbs), len(Actions))
	}
}

// TestLapsesAddUp: lapses are judged in all as well as one by one: many
// short ones that together leave the server with room for most of the
// time in force are counted, with their share of it.
func TestLapsesAddUp(t *testing.T) {
	t0 := time.Unix(0, 0)
	var l lapses
	l.since, l.full = t0, t0
	// Room found at every 40 ms tick for a second, the server back at its
	// limit at each next: 25 lapses of 40 ms, none long.
	for i := 1; i <= 25; i++ {
		at := t0.Add(time.Duration(i) * 40 * time.Millisecond)
		l.saw(true, false, at.Add(-20*time.Millisecond))
		l.saw(false, true, at)
	}
	l.end(t0.Add(time.Second))
	if l.n != 25 || l.longest != 40*time.Millisecond || l.total != time.Second || l.share() != 100 {
		t.Errorf("lapses %+v, share %.0f%%: want 25 of 40ms, 1s in all, 100%% of the second", l, l.share())
	}
	if s := l.String(); !strings.Contains(s, "25 time(s)") || !strings.Contains(s, "1s in all (100% of the time in force)") {
		t.Errorf("said %q", s)
	}
	// Kept at its limit throughout: no share.
	var kept lapses
	kept.since, kept.full = t0, t0
	kept.saw(false, true, t0.Add(time.Second))
	kept.end(t0.Add(time.Second))
	if kept.share() != 0 || kept.String() != "kept at its limit throughout" {
		t.Errorf("kept: %+v %q", kept, kept.String())
	}
}
