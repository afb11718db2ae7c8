// Package config holds the small pieces every scenario-level decoder shares:
// a Duration that reads "250ms" in YAML and JSON, and strict YAML decoding
// that rejects unknown fields with the file, line and field named.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as a Go duration string ("1.5s").
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML reads a duration string such as "250ms".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as 250ms or 2s", n.Line)
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}

// UnmarshalJSON reads a duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("want a duration string: %w", err)
		}
		if n > int64(MaxDuration) || n < -int64(MaxDuration) {
			return fmt.Errorf("%d ns is longer than any duration lockbench takes (at most %s)", n, time.Duration(MaxDuration))
		}
		*d = Duration(n)
		return nil
	}
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// MarshalYAML writes the duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func parseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (write e.g. 250ms or 2s)", s)
	}
	if v > MaxDuration || v < -MaxDuration {
		return 0, fmt.Errorf("%q is longer than any duration lockbench takes (at most %s)", s, time.Duration(MaxDuration))
	}
	return Duration(v), nil
}

// MaxDuration bounds every duration a scenario, a targets file or a
// driver's settings give (a case's length, a ttl, a fault's window, a
// clock step): a week. A 292-year ttl is a typo or an attack, and sums of
// such durations overflow.
const MaxDuration = 7 * 24 * time.Hour

// DecodeStrictBytes decodes YAML text into v, rejecting unknown fields.
// lineOffset is added to line numbers in error messages, so that errors
// about a fragment name the line in the original file.
func DecodeStrictBytes(b []byte, v any, lineOffset int) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return shiftLines(err, lineOffset)
	}
	return nil
}

// shiftLines rewrites "line N:" in yaml.v3 messages by offset.
func shiftLines(err error, offset int) error {
	if offset == 0 {
		return err
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		out := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			out[i] = shiftLine(m, offset)
		}
		return errors.New(strings.Join(out, "; "))
	}
	return errors.New(shiftLine(err.Error(), offset))
}

func shiftLine(msg string, offset int) string {
	var n int
	i := strings.Index(msg, "line ")
	if i < 0 {
		return msg
	}
	j := i + len("line ")
	k := j
	for k < len(msg) && msg[k] >= '0' && msg[k] <= '9' {
		k++
	}
	if k == j {
		return msg
	}
	fmt.Sscan(msg[j:k], &n)
	return msg[:j] + fmt.Sprint(n+offset) + msg[k:]
}
