package backends

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestBackendOptions: each backend's defaults, and every out-of-range or
// unknown option rejected with the field named.
func TestBackendOptions(t *testing.T) {
	tests := []struct {
		backend, opts, err string
	}{
		{"redis", "{}", ""},
		{"redis", "{persistence: sometimes}", "persistence"},
		{"redis", "{drift_factor: 0.7}", "drift_factor"},
		{"redis", "{max_retries: -2}", "max_retries"},
		{"redlock", "{nodes: 0}", ""},
		{"redlock", "{nodes: 10}", "nodes: 10 is outside 1..9"},
		{"redlock", "{timeout_factor: 1.5}", "timeout_factor"},
		{"redis-sentinel", "{replicas: 3}", "replicas: 3 is outside 1..2"},
		{"redis-sentinel", "{sentinels: 3, quorum: 4}", "quorum"},
		{"redis-sentinel", "{wait_replicas: 3}", "wait_replicas"},
		{"etcd", "{members: 8}", "members: 8 is outside 1..7"},
		{"etcd", "{wait: maybe}", `wait: "maybe" is not one of block, try`},
		{"etcd", "{heartbeat_interval: 100, election_timeout: 200}", "election_timeout"},
		{"consul", "{session_ttl: 5s}", "session_ttl"},
		{"consul", "{lock_delay: 90s}", "lock_delay"},
		{"zookeeper", "{session_timeout: 30s}", "outside the server's range"},
		{"postgres", "{scope: table}", `scope: "table" is not one of session, transaction`},
		{"postgres", "{wait: forever}", "wait"},
		{"local", "{x: 1}", "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.backend+" "+tt.opts, func(t *testing.T) {
			_, err := New(tt.backend, func(v any) error {
				dec := yaml.NewDecoder(strings.NewReader(tt.opts))
				dec.KnownFields(true)
				return dec.Decode(v)
			})
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("error %v, want one containing %q", err, tt.err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	b, err := New("etcd", func(any) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := len(b.Servers()); got != 3 {
		t.Errorf("etcd default members %d, want 3", got)
	}
	r, _ := New("redlock", func(any) error { return nil })
	if got := len(r.Servers()); got != 5 || r.Fenced() {
		t.Errorf("redlock: %d servers, fenced %v; want 5, false", got, r.Fenced())
	}
}

// TestEveryOptionIsDocumented: bench list shows every option of every
// backend with its type and a description that names its default.
func TestEveryOptionIsDocumented(t *testing.T) {
	for _, info := range All() {
		for _, o := range info.OptionList() {
			if o.Doc == "" || o.Type == "" {
				t.Errorf("%s option %s has no doc tag or type", info.Name, o.Name)
			}
			if !strings.Contains(o.Doc, "default") {
				t.Errorf("%s option %s: doc %q does not say its default", info.Name, o.Name, o.Doc)
			}
		}
	}
	if len(mustLookup(t, "redis-sentinel").OptionList()) < 10 {
		t.Error("redis-sentinel does not list the redis options it inlines")
	}
}

func mustLookup(t *testing.T, name string) Info {
	t.Helper()
	i, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return i
}
