package layout

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Redacted is what a secret is replaced by in a results folder.
const Redacted = "[redacted]"

// secretWord names, in a flag or a variable, what holds a secret.
const secretWord = `(?:requirepass|masterauth|masteruser-password|password|passwd|pass|auth|token|secret|api[-_]?key|access[-_]?key|private[-_]?key|credentials?)`

var (
	// --requirepass x, --password=x, -password x (a command's flag and
	// its value, in one string).
	secretFlag = regexp.MustCompile(`(?i)((?:^|\s)--?[a-z0-9-]*` + secretWord + `(?:=|\s+))("[^"]*"|'[^']*'|[^\s"']+)`)
	// PGPASSWORD=x, REDIS_AUTH_TOKEN=x (an assignment).
	secretAssign = regexp.MustCompile(`(?i)\b([a-z0-9_]*` + secretWord + `[a-z0-9_]*=)("[^"]*"|'[^']*'|[^\s"',]+)`)
	// redis-cli -a x.
	redisCliA = regexp.MustCompile(`((?:^|\s)-a\s+)("[^"]*"|'[^']*'|[^\s"']+)`)
	// scheme://user:password@host.
	urlPassword = regexp.MustCompile(`(://[^:/@\s]*:)([^@/\s]+)(@)`)
	// A flag alone (one element of a command given as a list).
	secretFlagAlone = regexp.MustCompile(`(?i)^--?[a-z0-9-]*` + secretWord + `$`)
)

// RedactText replaces the secrets a command line or a line of text may
// hold: the value of a secret flag (--requirepass x), of a secret
// assignment (PGPASSWORD=x), of redis-cli's -a and a URL's password.
func RedactText(s string) string {
	s = secretFlag.ReplaceAllString(s, "${1}"+Redacted)
	s = secretAssign.ReplaceAllString(s, "${1}"+Redacted)
	s = redisCliA.ReplaceAllString(s, "${1}"+Redacted)
	return urlPassword.ReplaceAllString(s, "${1}"+Redacted+"${3}")
}

// redactNode redacts a YAML document in place: every scalar as
// RedactText does; the value after a secret flag in a list (a command as
// [redis-server, --requirepass, x]); every value of an env: (a driver's,
// a server's: K=V items or a mapping), which may be anything, but
// search paths and locale (plainEnv). It reports
// whether it changed anything.
func redactNode(n *yaml.Node) bool {
	changed := false
	set := func(s *yaml.Node, v string) {
		if s.Kind == yaml.ScalarNode && s.Value != v {
			s.Value, s.Style, s.Tag = v, 0, "!!str"
			changed = true
		}
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c)
				if c.Kind == yaml.ScalarNode && secretFlagAlone.MatchString(c.Value) && i+1 < len(n.Content) {
					set(n.Content[i+1], Redacted)
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if strings.EqualFold(k.Value, "env") || strings.EqualFold(k.Value, "environment") {
					redactEnv(v, set)
					continue
				}
				walk(v)
			}
		case yaml.ScalarNode:
			if n.Tag == "!!str" || n.Tag == "" {
				set(n, RedactText(n.Value))
			}
		}
	}
	walk(n)
	return changed
}

// plainEnv are the variables whose values an env: section may show:
// search paths and locale, which are never secrets.
var plainEnv = map[string]bool{"PATH": true, "PYTHONPATH": true, "NODE_PATH": true, "CLASSPATH": true, "JAVA_HOME": true,
	"LANG": true, "LC_ALL": true, "TZ": true, "HOME": true, "PYTHONUNBUFFERED": true}

// redactEnv redacts every value of an env: section but plainEnv's.
func redactEnv(v *yaml.Node, set func(*yaml.Node, string)) {
	switch v.Kind {
	case yaml.SequenceNode:
		for _, c := range v.Content {
			if k, _, ok := strings.Cut(c.Value, "="); ok && c.Kind == yaml.ScalarNode && !plainEnv[k] {
				set(c, k+"="+Redacted)
			}
		}
	case yaml.MappingNode:
		for i := 1; i < len(v.Content); i += 2 {
			if !plainEnv[v.Content[i-1].Value] {
				set(v.Content[i], Redacted)
			}
		}
	case yaml.ScalarNode:
		set(v, RedactText(v.Value))
	}
}

// RedactYAML returns a scenario's or a targets file's text with its
// secrets redacted (see redactNode): the text itself when it holds none;
// otherwise the document re-encoded (comments kept, layout may change),
// or, if it does not parse, the text redacted line by line.
func RedactYAML(text string) string {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil || doc.Kind == 0 {
		return RedactText(text)
	}
	if !redactNode(&doc) {
		return text
	}
	b, err := yaml.Marshal(&doc)
	if err != nil {
		return RedactText(text)
	}
	return "# secrets redacted by lockbench (" + Redacted + ")\n" + string(b)
}

// RedactValue returns v (anything that encodes as JSON: a parsed targets
// file) with its secrets redacted, as a JSON value.
func RedactValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	redactNode(&doc)
	var out any
	if err := doc.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// minSecret is the shortest value a Redactor replaces wherever it stands:
// a shorter one ("1", "yes") would take words out of every line, and is no
// credential.
const minSecret = 6

// Redactor redacts, in text a program printed, the values of the secrets
// it was given (an env: section's, plainEnv's and LOCKBENCH_* settings
// aside) wherever they stand, then what RedactText finds: a driver that
// prints its token or a URL with it in a traceback leaves neither in a log.
type Redactor struct{ values []string }

// NewRedactor takes the secrets of env (K=V items) whose values are long
// enough to be told from words.
func NewRedactor(env []string) *Redactor {
	r := &Redactor{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || plainEnv[k] || strings.HasPrefix(k, "LOCKBENCH_") || len(v) < minSecret {
			continue
		}
		r.values = append(r.values, v)
	}
	// The longest first: a secret that holds another is replaced whole.
	slices.SortFunc(r.values, func(a, b string) int { return len(b) - len(a) })
	return r
}

// Redact returns s with the secrets' values and RedactText's redacted.
func (r *Redactor) Redact(s string) string {
	if r != nil {
		for _, v := range r.values {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return RedactText(s)
}
