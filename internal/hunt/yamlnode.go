package hunt

import (
	"fmt"
	"sort"

	"go.yaml.in/yaml/v3"
)

// The few YAML node operations rendering needs.

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
func num(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: s} }

// valueOf is the value of key in mapping m, nil when absent.
func valueOf(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// setKey sets key in mapping m, in place when present, else at the end.
func setKey(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, str(key), v)
}

// delKey removes key from mapping m.
func delKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// setFlow sets key to a value written in YAML flow style.
func setFlow(m *yaml.Node, key, flow string) error {
	var d yaml.Node
	if err := yaml.Unmarshal([]byte(flow), &d); err != nil || len(d.Content) == 0 {
		return fmt.Errorf("%s: %q is not YAML: %v", key, flow, err)
	}
	v := d.Content[0]
	v.Style = yaml.FlowStyle
	setKey(m, key, v)
	return nil
}

func deepCopy(n *yaml.Node) *yaml.Node {
	if n == nil {
		return &yaml.Node{Kind: yaml.MappingNode}
	}
	cp := *n
	cp.Content = nil
	for _, c := range n.Content {
		cp.Content = append(cp.Content, deepCopy(c))
	}
	return &cp
}

func sortedKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
