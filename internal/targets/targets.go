// Package targets reads a targets file: the existing servers that bench
// run -targets points the harness at, instead of starting local ones.
//
//	servers:                 # by the names the backend's cluster uses
//	  redis-1: 10.0.0.5:6379
//	  etcd-1: 10.0.0.6:2379
//	auth:                    # per credential family; values from the environment only
//	  redis: {password_env: LB_REDIS_PASSWORD, tls: {ca_file: ca.pem}}
//	  etcd: {username_env: LB_ETCD_USER, password_env: LB_ETCD_PASSWORD}
//	  postgres: {username_env: PGUSER, password_env: PGPASSWORD, database: locks}
//	toxiproxy: {api: http://127.0.0.1:8474, listen_host: 127.0.0.1}   # optional
//	control:                 # optional, per server: how the server faults reach it (control.Section)
//	  redis-1:
//	    ssh: {host: 10.0.0.5, user: root, key_env: LB_SSH_KEY, known_hosts: known_hosts}
//	    pid_file: /run/redis.pid
//	    start: "redis-server /etc/redis/redis.conf --daemonize yes"
//
// A credential is never in the file, in run.json, in a log or in a
// report: the file names environment variables, and each process reads
// them when it connects.
package targets

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/control"
	"github.com/lockbench/lockbench/internal/suggest"
	"go.yaml.in/yaml/v3"
)

// File is a parsed targets file.
type File struct {
	Path      string                           `json:"path"`
	Servers   map[string]string                `yaml:"servers" json:"servers"`
	Auth      map[string]*backends.Credentials `yaml:"auth" json:"auth,omitempty"`
	Toxiproxy *Toxiproxy                       `yaml:"toxiproxy" json:"toxiproxy,omitempty"`
	// Control gives servers a control plane: with it, the faults that act
	// on servers (pause, kill, the cuts) act on these ones over SSH.
	Control map[string]*control.Section `yaml:"control" json:"control,omitempty"`
}

// Controlled reports whether server name has a control plane.
func (f *File) Controlled(name string) bool { return f != nil && f.Control[name] != nil }

// Plane is the control plane of the file's control sections ("ssh" or
// "kubernetes"; Load checks they all use one), or "" without any.
func (f *File) Plane() string {
	for _, c := range f.Control {
		if c != nil {
			return c.Plane()
		}
	}
	return ""
}

// Toxiproxy is an external toxiproxy server for link faults: its API, and
// the host its proxies listen on (which the workers must reach).
type Toxiproxy struct {
	API        string `yaml:"api" json:"api"`
	ListenHost string `yaml:"listen_host" json:"listen_host"`
}

// Load reads and checks a targets file; every problem is reported as
// file:line: field: message, all at once. families are the credential
// families its auth section may name: the server kinds' own
// (cluster.CredentialFamilies).
func Load(path string, families []string) (*File, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read targets: %w", err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: the file is empty: want servers", path)
	}
	doc := root.Content[0]
	f := &File{Path: path}
	if err := config.DecodeStrict(doc, f); err != nil {
		return nil, fmt.Errorf("%s:%w", path, trimLine(errors.New(typeNames.Replace(err.Error()))))
	}
	var errs []string
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s:%d: %s: %s", path, lineOf(doc, field), field, fmt.Sprintf(format, args...)))
	}
	// addIn reports a problem of one entry of a section (a server's
	// control section) at that entry's line.
	addIn := func(section, entry, format string, args ...any) {
		line := lineOf(doc, section)
		if v := valueOf(doc, section); v != nil {
			line = lineOf(v, entry)
		}
		errs = append(errs, fmt.Sprintf("%s:%d: %s.%s: %s", path, line, section, entry, fmt.Sprintf(format, args...)))
	}
	if len(f.Servers) == 0 {
		add("servers", "no server: name the servers of the backends the scenario uses (redis-1, etcd-1, ...)")
	}
	for _, name := range slices.Sorted(maps.Keys(f.Servers)) {
		if _, _, err := net.SplitHostPort(f.Servers[name]); err != nil {
			add("servers", "%s: %q is not host:port", name, f.Servers[name])
		}
	}
	for _, fam := range slices.Sorted(maps.Keys(f.Auth)) {
		if !contains(families, fam) {
			add("auth", "%q is not a credential family%s (known: %s)", fam, suggest.Hint(fam, families), strings.Join(families, ", "))
			continue
		}
		if err := f.Auth[fam].Check(); err != nil {
			add("auth", "%s: %v", fam, err)
		}
	}
	planes := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(f.Control)) {
		if c := f.Control[name]; c != nil {
			planes[c.Plane()] = true
		}
		if _, ok := f.Servers[name]; !ok {
			addIn("control", name, "no such server in servers")
			continue
		}
		if f.Control[name] == nil {
			addIn("control", name, "empty")
			continue
		}
		if err := f.Control[name].Check(); err != nil {
			addIn("control", name, "%v", err)
		}
		if k := f.Control[name].SSH.KeyEnv; k != "" && os.Getenv(k) == "" {
			addIn("control", name, "ssh.key_env: the environment variable %s is not set (it holds the private key, or its path)", k)
		}
		// A relative known_hosts or kubeconfig file is the targets file's
		// neighbour.
		if kh := f.Control[name].SSH.KnownHosts; kh != "" && !filepath.IsAbs(kh) {
			f.Control[name].SSH.KnownHosts = filepath.Join(filepath.Dir(path), kh)
		}
		if k := f.Control[name].Kubernetes; k != nil && k.Kubeconfig != "" && !filepath.IsAbs(k.Kubeconfig) {
			k.Kubeconfig = filepath.Join(filepath.Dir(path), k.Kubeconfig)
		}
	}
	if len(planes) > 1 {
		add("control", "every control section uses ssh, or every one kubernetes: a run drives its servers through one control plane")
	}
	if t := f.Toxiproxy; t != nil {
		if u, err := url.Parse(t.API); err != nil || u.Host == "" {
			add("toxiproxy", "api: %q is not a URL such as http://127.0.0.1:8474", t.API)
		}
		if t.ListenHost == "" {
			add("toxiproxy", "listen_host: missing (the host its proxies listen on, which the workers dial)")
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return f, nil
}

// Check says which servers of a case's backend the file does not name.
func (f *File) Check(specs []backends.ServerSpec) error {
	var missing []string
	for _, s := range specs {
		if _, ok := f.Servers[s.Name]; !ok {
			missing = append(missing, s.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the targets file %s names no %s (it has: %s)", f.Path, strings.Join(missing, ", "), strings.Join(slices.Sorted(maps.Keys(f.Servers)), ", "))
	}
	return nil
}

// valueOf is the value node of key in a mapping, or nil.
func valueOf(doc *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == key {
			return doc.Content[i+1]
		}
	}
	return nil
}

func lineOf(doc *yaml.Node, key string) int {
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == key {
			return doc.Content[i].Line
		}
	}
	return doc.Line
}

// typeNames says what the decoder's Go type names are in the file.
var typeNames = strings.NewReplacer("type control.Section", "a control section", "type control.SSH", "a control section's ssh",
	"type control.Kubernetes", "a control section's kubernetes", "type backends.Credentials", "an auth entry",
	"type targets.Toxiproxy", "toxiproxy", "type targets.File", "the targets file")

// trimLine turns "line 3: field x ..." into "3: field x ...".
func trimLine(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), "line "))
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
