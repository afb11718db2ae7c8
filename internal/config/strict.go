package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/lockbench/lockbench/internal/suggest"

	"go.yaml.in/yaml/v3"
)

// DecodeStrict decodes a YAML node into v, rejecting fields v does not
// have. Unknown fields are found by walking the node itself, so every
// error names the line it was written on (comments and blank lines
// included); then the node is decoded. A nil or empty node leaves v
// unchanged.
func DecodeStrict(n *yaml.Node, v any) error {
	if n == nil || n.Kind == 0 {
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if err := CheckAliases(n); err != nil {
		return err
	}
	if err := unknownFields(n, reflect.TypeOf(v)); err != nil {
		return err
	}
	return n.Decode(v)
}

var (
	nodeType        = reflect.TypeOf(yaml.Node{})
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
)

// unknownFields reports the first mapping key in n that type t has no
// field for.
func unknownFields(n *yaml.Node, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		if t.Implements(unmarshalerType) {
			return nil
		}
		t = t.Elem()
	}
	if t == nodeType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil // decoded by its own rules, later
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return unknownFields(n.Content[0], t)
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return unknownFields(n.Alias, t)
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil // a type error; the decoder names it
		}
		fields := structFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			ft, ok := fields[k.Value]
			if !ok {
				return fmt.Errorf("line %d: field %s not found in type %s%s (known: %s)", k.Line, k.Value, t, suggest.Hint(k.Value, fieldNames(fields)), strings.Join(fieldNames(fields), ", "))
			}
			if err := unknownFields(n.Content[i+1], ft); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for _, c := range n.Content {
				if err := unknownFields(c, t.Elem()); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 1; i < len(n.Content); i += 2 {
				if err := unknownFields(n.Content[i], t.Elem()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// structFields maps the YAML names of t's fields, inline ones included,
// to their types.
func structFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range structFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func fieldNames(fields map[string]reflect.Type) []string {
	out := make([]string, 0, len(fields))
	for k := range fields {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// MaxExpandedNodes bounds how many nodes a document may stand for once its
// aliases are expanded: a few hundred bytes of nested anchors (a "billion
// laughs") stand for billions, which expanding or walking would take
// gigabytes or hours to.
const MaxExpandedNodes = 100_000

// CheckAliases fails when n, its aliases expanded, stands for more than
// MaxExpandedNodes nodes. It counts in linear time (each node's expanded
// size once), allocating nothing of the expansion.
func CheckAliases(n *yaml.Node) error {
	if n == nil {
		return nil
	}
	memo := map[*yaml.Node]int{}
	var size func(n *yaml.Node, depth int) int
	size = func(n *yaml.Node, depth int) int {
		if s, ok := memo[n]; ok {
			return s
		}
		if depth > 1000 {
			return MaxExpandedNodes + 1 // an alias cycle, or absurd nesting
		}
		memo[n] = MaxExpandedNodes + 1 // a node met again while being sized: a cycle
		s := 1
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			s += size(n.Alias, depth+1)
		}
		for _, c := range n.Content {
			if s += size(c, depth+1); s > MaxExpandedNodes {
				break
			}
		}
		memo[n] = min(s, MaxExpandedNodes+1)
		return memo[n]
	}
	if s := size(n, 0); s > MaxExpandedNodes {
		return fmt.Errorf("line %d: its aliases expand to more than %d YAML nodes: refused (nested anchors, a \"billion laughs\"?)", n.Line, MaxExpandedNodes)
	}
	return nil
}
