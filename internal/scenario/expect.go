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
// for its two bounds, written as durations in the file and kept as
// nanoseconds in the record, and for outcomes written "any", kept in
// Expectation.Any.
type expectDoc struct {
	history.Expectation `yaml:",inline"`
	MaxGap              config.Duration `yaml:"max_gap"`
	MinGap              config.Duration `yaml:"min_gap"`
	RecoversWithin      config.Duration `yaml:"recovers_within"`
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
