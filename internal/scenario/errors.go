package scenario

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Errors is every problem found in a scenario file.
type Errors struct {
	Path string
	List []string
}

func (e *Errors) Error() string {
	return fmt.Sprintf("%s: %d problem(s):\n  %s", e.Path, len(e.List), strings.Join(e.List, "\n  "))
}

// add records a problem as file:line: field: message.
func (e *Errors) add(line int, field, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	if line < 1 {
		line = 1
	}
	e.List = append(e.List, printable(fmt.Sprintf("%s:%d: %s", e.Path, line, msg)))
}

// printable escapes the control characters of s (a terminal escape, a
// newline, a carriage return) as Go would quote them: what a file wrote
// into a name or a value is printed, never acted on by the terminal.
func printable(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

// addErr records a decoding error, at the line the YAML library names when
// it names one (else at line), without repeating it in the message.
func (e *Errors) addErr(line int, field string, err error) {
	msg := yamlMsg(err)
	if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
		if n, perr := strconv.Atoi(msg[m[2]:m[3]]); perr == nil {
			line = n
			msg = msg[:m[0]] + msg[m[1]:]
		}
	}
	e.add(line, field, "%s", msg)
}

// valueOf returns the value node of key in mapping n, or nil.
func valueOf(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// lineOf returns the line of a dotted path ("retry.attempts") inside n, or
// the line of the deepest part of it that exists; def when n is empty.
func lineOf(n *yaml.Node, path string, def int) int {
	if n == nil || n.Kind == 0 {
		return def
	}
	line := n.Line
	for _, part := range strings.Split(path, ".") {
		v := valueOf(n, part)
		if v == nil {
			return line
		}
		n, line = v, v.Line
	}
	return line
}

// has reports whether the dotted path is written in n.
func has(n *yaml.Node, path string) bool {
	for _, part := range strings.Split(path, ".") {
		if n = valueOf(n, part); n == nil {
			return false
		}
	}
	return true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "single value"
	}
	return "node"
}

// yamlMsg strips yaml.v3's "yaml: " prefixes for readable messages.
func yamlMsg(err error) string {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "yaml: unmarshal errors:\n  ", "")
	msg = strings.ReplaceAll(msg, "yaml: ", "")
	msg = strings.ReplaceAll(msg, "\n  ", "; ")
	return msg
}

// IsConfigError reports whether err is a problem with the scenario file.
func IsConfigError(err error) bool {
	var e *Errors
	return errors.As(err, &e)
}
