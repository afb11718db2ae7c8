package scenario

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"go.yaml.in/yaml/v3"
)

// This file reads a case's expect: block (MODEL §13).

// expectDoc is a case's expect: in YAML: history.Expectation itself, but
// for its bounds, written as durations in the file and kept as
// nanoseconds in the record, and for outcomes written "any", kept in
// Expectation.Any.
type expectDoc struct {
	history.Expectation `yaml:",inline"`
	MaxGap              config.Duration `yaml:"max_gap"`
	MinGap              config.Duration `yaml:"min_gap"`
	RecoversWithin      config.Duration `yaml:"recovers_within"`
	MaxOverlap          config.Duration `yaml:"max_overlap"`
}

// UnmarshalYAML takes the outcomes written "any" out of n before decoding
// the rest strictly.
func (d *expectDoc) UnmarshalYAML(n *yaml.Node) error {
	type plain expectDoc
	var anyOf []string
	if n.Kind == yaml.MappingNode {
		c := *n
		c.Content = nil
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.ScalarNode && v.Tag == "!!str" && v.Value == "any" {
				if !slices.Contains(history.AnyOutcomes, k.Value) {
					return fmt.Errorf("line %d: %s: any is only for an outcome (%s)", v.Line, k.Value, strings.Join(history.AnyOutcomes, ", "))
				}
				anyOf = append(anyOf, k.Value)
				continue
			}
			if slices.Contains(history.AnyOutcomes, k.Value) && (v.Kind != yaml.ScalarNode || v.Tag != "!!bool") {
				return fmt.Errorf("line %d: %s: want true, false or any, not %q", v.Line, k.Value, v.Value)
			}
			c.Content = append(c.Content, k, v)
		}
		n = &c
	}
	var p plain
	if err := config.DecodeStrict(n, &p); err != nil {
		return err
	}
	*d = expectDoc(p)
	d.Any = anyOf
	return nil
}

// check reports what no run could meet, or what contradicts itself, at
// line (field is where the expect: block is, for messages).
func (d expectDoc) check(errs *Errors, line int, field string) bool {
	ok := true
	if d.MaxGap < 0 || d.RecoversWithin < 0 || d.MinGap < 0 || d.MaxOverlap < 0 {
		errs.add(line, field, "max_gap, min_gap, recovers_within and max_overlap must not be negative")
		ok = false
	}
	if d.MaxGap > 0 && d.MinGap > d.MaxGap {
		errs.add(line, field+".min_gap", "%s is longer than max_gap %s: no run can meet both", d.MinGap, d.MaxGap)
		ok = false
	}
	if d.MaxOverlap > 0 && !d.IsAny("violations") && (d.Violations == nil || !*d.Violations) {
		// MODEL §13: the bound is on overlaps the case allows; with
		// violations false (the default) any overlap breaks it already.
		errs.add(line, field+".max_overlap", "bounds how long two holders may overlap, which violations: false (the default) forbids altogether: say violations: true or any")
		ok = false
	}
	e := d.Expectation
	if e.Measure && (len(e.Any) > 0 || e.Violations != nil || e.StaleAccepted != nil || e.LostUpdates != nil || e.Available != nil ||
		d.MaxGap != 0 || d.MinGap != 0 || d.RecoversWithin != 0 || d.MaxOverlap != 0 || e.TokenRegressions != nil || e.LeasesLost != nil ||
		e.Linearizable != nil || e.LateReleasesAccepted != nil || e.LateExtensionsAccepted != nil) {
		errs.add(line, field+".measure", "a case that measures expects nothing: leave out any, violations, stale_writes_accepted, lost_updates, token_regressions, leases_lost, available, linearizable, late_releases_accepted, late_extensions_accepted, max_gap, min_gap, max_overlap and recovers_within")
		ok = false
	}
	return ok
}

// record is the expectation as the case's meta records it: its bounds in
// nanoseconds.
func (d expectDoc) record() history.Expectation {
	e := d.Expectation
	e.MaxGapNs, e.MinGapNs, e.RecoversWithinNs = int64(d.MaxGap), int64(d.MinGap), int64(d.RecoversWithin)
	e.MaxOverlapNs = int64(d.MaxOverlap)
	return e
}
