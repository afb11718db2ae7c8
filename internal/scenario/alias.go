package scenario

import "go.yaml.in/yaml/v3"

// resolveAliases returns a copy of n with every alias replaced by a copy of
// the node it refers to. A case's options travel to the workers as YAML
// marshalled from their node, and an alias (`options: *common`, or one
// inside them) would be marshalled as its bare name, which the worker could
// not resolve: what it stands for is marshalled instead.
func resolveAliases(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	c := *n
	c.Anchor = ""
	if len(n.Content) > 0 {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, k := range n.Content {
			c.Content[i] = resolveAliases(k)
		}
	}
	return &c
}
