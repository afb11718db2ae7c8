package driver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Protocol is the version of the driver protocol (docs/drivers.md) this
// lockbench speaks; a driver's hello answer must name the same.
const Protocol = 1

// MaxLine is the longest line a driver may write, newline excluded.
const MaxLine = 1 << 20

// Message types. lockbench writes hello, acquire, release, extend and
// ping; a driver writes hello (its answer to lockbench's), ok, error and
// lost.
const (
	TypeHello   = "hello"
	TypeAcquire = "acquire"
	TypeRelease = "release"
	TypeExtend  = "extend"
	TypePing    = "ping"
	TypeOK      = "ok"
	TypeError   = "error"
	TypeLost    = "lost"
	// TypeBare is the one line a driver started for a bare loop (Hello.Bare)
	// writes when the loop is over.
	TypeBare = "bare"
)

// Error codes of a driver's error answer.
const (
	CodeHeld        = "held"        // acquire: someone else holds the lock (surely not taken)
	CodeNotHeld     = "not_held"    // release, extend: the lease is no longer this client's
	CodeTimeout     = "timeout"     // no result within timeout_ms
	CodeUnavailable = "unavailable" // the library could not reach its servers
	CodeUnsupported = "unsupported" // an operation or option the driver does not have
	CodeBadRequest  = "bad_request" // a request the driver cannot make sense of
	CodeOptions     = "options"     // hello: options the driver refuses
	CodeError       = "error"       // anything else
)

var codes = []string{CodeHeld, CodeNotHeld, CodeTimeout, CodeUnavailable, CodeUnsupported, CodeBadRequest, CodeOptions, CodeError}

// definiteCodes say by themselves that the operation did not take effect.
var definiteCodes = []string{CodeHeld, CodeNotHeld, CodeUnsupported, CodeBadRequest, CodeOptions}

// Effects of a failed operation: whether it surely did not take effect,
// or may have (an unknown outcome in the model), or was surely never sent
// (nothing reached the servers: surely no effect, and no word of theirs).
// A driver that does not say means unknown.
const (
	EffectNone    = "none"
	EffectUnknown = "unknown"
	EffectUnsent  = "unsent"
)

// Acquisition modes a driver can offer (Abilities.Acquire).
const (
	AcquireWait = "wait" // the library's blocking acquire, bounded by timeout_ms
	AcquireTry  = "try"  // one attempt: held at once when someone holds it
)

// Server is one server as the driver is told of it.
type Server struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Addr is where the driver connects: a relay of lockbench's, which
	// reaches the server through the instance's routes, so every link
	// fault acts on the driver's connections.
	Addr string `json:"addr"`
	// Real is the server's own address, the one servers name to clients
	// (a Sentinel's master, a cluster's member list): a driver whose
	// library learns addresses at run time maps them to Addr.
	Real     string            `json:"real"`
	Settings map[string]string `json:"settings,omitempty"`
}

// Hello is lockbench's first line to a driver.
type Hello struct {
	Type     string   `json:"type"`
	Protocol int      `json:"protocol"`
	Instance int      `json:"instance"`
	Servers  []Server `json:"servers"`
	// Namespace is what every name the driver makes on a server starts
	// with (lock keys, paths), so that runs keep apart.
	Namespace string `json:"namespace"`
	// TTLMs is the workload's lease time.
	TTLMs int64 `json:"ttl_ms"`
	// Options are the library's own options, from the scenario.
	Options map[string]any `json:"options"`
	// Bare, when set, asks for the library's own loop instead of the
	// protocol (bench driver perf): Clients threads each acquire and
	// release a key of their own for Seconds, then one bare line.
	Bare *Bare `json:"bare,omitempty"`
}

// Bare is a bare loop's shape.
type Bare struct {
	Clients int     `json:"clients"`
	Seconds float64 `json:"seconds"`
}

// Request is one operation lockbench asks a driver for.
type Request struct {
	Type   string `json:"type"`
	ID     uint64 `json:"id"`
	Client int    `json:"client"`
	Key    string `json:"key,omitempty"`
	Lease  string `json:"lease,omitempty"`
	// Wait: an acquire that waits for the lock (up to TimeoutMs) rather
	// than trying once.
	Wait bool `json:"wait,omitempty"`
	// TTLMs: an extension's new lease time.
	TTLMs int64 `json:"ttl_ms,omitempty"`
	// TimeoutMs is how long the driver has to answer, with the result or
	// an error (a timeout, whose effect is unknown).
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
}

// Abilities are what a driver says its library can do.
type Abilities struct {
	Token  bool `json:"token"`  // acquisitions carry a fencing token
	Extend bool `json:"extend"` // a lease can be extended
	Lost   bool `json:"lost"`   // the library says when a lease is gone
	// Acquire lists the acquisition modes, the library's default first.
	Acquire []string `json:"acquire"`
	// Concurrent: the driver serves several clients at once, each
	// client's operations in order (one driver process per instance);
	// false: one process per client.
	Concurrent bool `json:"concurrent"`
	// Bare: the driver runs the library's own loop when asked (Hello.Bare).
	Bare bool `json:"bare"`
}

// Reply is one line a driver writes. Which fields a reply may carry
// depends on its type; ParseReply checks them.
type Reply struct {
	Type string  `json:"type"`
	ID   *uint64 `json:"id,omitempty"`
	// hello
	Protocol  int        `json:"protocol,omitempty"`
	Library   string     `json:"library,omitempty"`
	Version   string     `json:"version,omitempty"`
	Language  string     `json:"language,omitempty"`
	Abilities *Abilities `json:"abilities,omitempty"`
	// ok to an acquire; lost
	Lease string  `json:"lease,omitempty"`
	Token *uint64 `json:"token,omitempty"`
	// error
	Code    string `json:"code,omitempty"`
	Effect  string `json:"effect,omitempty"`
	Message string `json:"message,omitempty"`
	// lost
	Client *int `json:"client,omitempty"`
	// bare
	Cycles  *int64   `json:"cycles,omitempty"`
	Errors  *int64   `json:"errors,omitempty"`
	Seconds *float64 `json:"seconds,omitempty"`
}

// Definite reports whether an error reply says its operation surely did
// not take effect.
func (r *Reply) Definite() bool {
	return slices.Contains(definiteCodes, r.Code) || r.Effect == EffectNone || r.Effect == EffectUnsent
}

// Unsent reports whether an error reply says its operation was never sent.
func (r *Reply) Unsent() bool { return r.Effect == EffectUnsent }

// answeredCodes are the servers' own answers: a request that got one was
// sent.
var answeredCodes = []string{CodeHeld, CodeNotHeld}

// MaxLease is the longest lease handle a driver may give.
const MaxLease = 256

// ParseReply reads one line a driver wrote: a JSON object of a known type
// with the fields that type allows and no others. It checks what a line
// can say alone; whether it answers something lockbench asked is the
// caller's to check.
func ParseReply(line []byte) (Reply, error) {
	var r Reply
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(bytes.TrimSpace(line)) == 0 {
		return r, errors.New("an empty line")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("not a protocol message: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return r, errors.New("not one JSON object: more follows it on the line")
	}
	set := presentFields(&r)
	var allowed []string
	switch r.Type {
	case TypeHello:
		allowed = []string{"protocol", "library", "version", "language", "abilities"}
		if r.Protocol != Protocol {
			return r, fmt.Errorf("hello: protocol %d, but lockbench speaks %d", r.Protocol, Protocol)
		}
		if strings.TrimSpace(r.Library) == "" || strings.TrimSpace(r.Version) == "" {
			return r, errors.New("hello: library and version are required")
		}
		if r.Abilities == nil {
			return r, errors.New("hello: abilities are required")
		}
		if len(r.Abilities.Acquire) == 0 {
			return r, errors.New("hello: abilities.acquire must list wait, try or both")
		}
		for i, m := range r.Abilities.Acquire {
			if m != AcquireWait && m != AcquireTry {
				return r, fmt.Errorf("hello: abilities.acquire: %q is neither wait nor try", m)
			}
			if slices.Contains(r.Abilities.Acquire[:i], m) {
				return r, fmt.Errorf("hello: abilities.acquire lists %s twice", m)
			}
		}
	case TypeOK:
		allowed = []string{"id", "lease", "token"}
		if r.ID == nil {
			return r, errors.New("ok: an id is required")
		}
		if len(r.Lease) > MaxLease {
			return r, fmt.Errorf("ok: a lease handle of %d bytes (at most %d)", len(r.Lease), MaxLease)
		}
	case TypeError:
		allowed = []string{"id", "code", "effect", "message"}
		if !slices.Contains(codes, r.Code) {
			return r, fmt.Errorf("error: code %q is not one of %s", r.Code, strings.Join(codes, ", "))
		}
		switch r.Effect {
		case "", EffectNone, EffectUnknown, EffectUnsent:
		default:
			return r, fmt.Errorf("error: effect %q is not none, unknown or unsent", r.Effect)
		}
		if r.Effect == EffectUnknown && slices.Contains(definiteCodes, r.Code) {
			return r, fmt.Errorf("error: code %s says the operation did not take effect, but effect says unknown", r.Code)
		}
		if r.Effect == EffectUnsent && slices.Contains(answeredCodes, r.Code) {
			return r, fmt.Errorf("error: code %s is the servers' answer, so the request was sent, but effect says unsent", r.Code)
		}
	case TypeLost:
		allowed = []string{"client", "lease", "message"}
		if r.Client == nil || r.Lease == "" {
			return r, errors.New("lost: client and lease are required")
		}
	case TypeBare:
		allowed = []string{"cycles", "errors", "seconds"}
		if r.Cycles == nil || r.Seconds == nil || *r.Cycles < 0 || *r.Seconds <= 0 {
			return r, errors.New("bare: cycles (>= 0) and seconds (> 0) are required")
		}
	case "":
		return r, errors.New("no type")
	default:
		return r, fmt.Errorf("type %q is not one a driver writes (hello, ok, error, lost, bare)", r.Type)
	}
	for _, f := range set {
		if !slices.Contains(allowed, f) {
			return r, fmt.Errorf("%s: field %s does not belong in it", r.Type, f)
		}
	}
	return r, nil
}

// presentFields names the fields a reply carries besides its type.
func presentFields(r *Reply) []string {
	var out []string
	add := func(on bool, name string) {
		if on {
			out = append(out, name)
		}
	}
	add(r.ID != nil, "id")
	add(r.Protocol != 0, "protocol")
	add(r.Library != "", "library")
	add(r.Version != "", "version")
	add(r.Language != "", "language")
	add(r.Abilities != nil, "abilities")
	add(r.Lease != "", "lease")
	add(r.Token != nil, "token")
	add(r.Code != "", "code")
	add(r.Effect != "", "effect")
	add(r.Message != "", "message")
	add(r.Client != nil, "client")
	add(r.Cycles != nil, "cycles")
	add(r.Errors != nil, "errors")
	add(r.Seconds != nil, "seconds")
	return out
}

// quote shortens a driver's line for a message.
func quote(line []byte) string {
	const max = 120
	if len(line) > max {
		return fmt.Sprintf("%q…", line[:max])
	}
	return fmt.Sprintf("%q", line)
}
