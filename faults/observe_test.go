package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
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
