package targets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/internal/cluster"
)

// TestControlSection: a control plane is checked field by field, every
// problem reported at once with the file, and a relative known_hosts is
// the targets file's neighbour.
func TestControlSection(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "t.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := `servers: {redis-1: "10.0.0.5:6379"}
control:
  redis-1:
    ssh: {host: 10.0.0.5, user: root, key_env: LB_SSH_KEY, known_hosts: kh}
    pid_file: /run/redis.pid
    start: "redis-server /etc/redis.conf --daemonize yes"
`
	t.Setenv("LB_SSH_KEY", "/nonexistent/key")
	f, err := Load(write(good), cluster.CredentialFamilies())
	if err != nil {
		t.Fatal(err)
	}
	if !f.Controlled("redis-1") || f.Controlled("redis-2") {
		t.Errorf("controlled: %v %v", f.Controlled("redis-1"), f.Controlled("redis-2"))
	}
	if kh := f.Control["redis-1"].SSH.KnownHosts; kh != filepath.Join(dir, "kh") {
		t.Errorf("known_hosts = %q, want it next to the targets file", kh)
	}
	for _, tt := range []struct{ body, want string }{
		{strings.Replace(good, "pid_file: /run/redis.pid", "", 1), "exactly one of pid_file, pattern or unit"},
		{strings.Replace(good, "    start: \"redis-server /etc/redis.conf --daemonize yes\"\n", "", 1), "start: missing"},
		{strings.Replace(good, ", known_hosts: kh", "", 1), "known_hosts: missing"},
		{strings.Replace(good, "key_env: LB_SSH_KEY, ", "", 1), "key_env: missing"},
		{strings.Replace(good, "control:\n  redis-1:", "control:\n  redis-9:", 1), "redis-9: no such server"},
		{strings.Replace(good, "pid_file:", "pidfile:", 1), "pidfile"},
		{strings.Replace(good, "pid_file: /run/redis.pid", "pid_file: /run/redis.pid\n    unit: redis", 1), "exactly one"},
		{strings.Replace(good, "LB_SSH_KEY", "LB_NO_SUCH_KEY", 1), "t.yaml:3: control.redis-1: ssh.key_env: the environment variable LB_NO_SUCH_KEY is not set"},
		{strings.Replace(good, "    ssh: {host: 10.0.0.5, user: root, key_env: LB_SSH_KEY, known_hosts: kh}\n", "", 1), "give ssh: {host, user, key_env, known_hosts}"},
		{strings.Replace(good, "pid_file:", "data_dri: /x\n    pid_file:", 1), "field data_dri not found in a control section"},
	} {
		_, err := Load(write(tt.body), cluster.CredentialFamilies())
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "t.yaml") {
			t.Errorf("want an error saying %q, got %v", tt.want, err)
		}
	}
}

// TestKubernetesControlSection: a control section may name a pod instead
// of an SSH host; it finds the process by pattern or pid file, has no
// start (the pod's controller restarts it), and one file uses one plane.
func TestKubernetesControlSection(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "t.yaml")
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	good := `servers: {etcd-1: "etcd-0.etcd.lb.svc:2379", etcd-2: "etcd-1.etcd.lb.svc:2379"}
control:
  etcd-1: {kubernetes: {namespace: lb, pod: etcd-0, kubeconfig: kc}, pattern: "--initial-cluster-state"}
  etcd-2: {kubernetes: {namespace: lb, pod: etcd-1}, pattern: "--initial-cluster-state"}
`
	f, err := Load(write(good), cluster.CredentialFamilies())
	if err != nil {
		t.Fatal(err)
	}
	if f.Plane() != "kubernetes" || f.Control["etcd-1"].Kubernetes.AgentName() != "lockbench-agent" || f.Control["etcd-1"].Kubernetes.Kubeconfig != filepath.Join(dir, "kc") {
		t.Errorf("plane %q, agent %q, kubeconfig %q", f.Plane(), f.Control["etcd-1"].Kubernetes.AgentName(), f.Control["etcd-1"].Kubernetes.Kubeconfig)
	}
	for _, tt := range []struct{ body, want string }{
		{strings.Replace(good, "pod: etcd-0, ", "", 1), "kubernetes.pod: missing"},
		{strings.Replace(good, `pattern: "--initial-cluster-state"}`+"\n  etcd-2", `pattern: "x", start: "y"}`+"\n  etcd-2", 1), "unit and start are for ssh"},
		{strings.Replace(good, `, pattern: "--initial-cluster-state"}`+"\n  etcd-2", "}\n  etcd-2", 1), "exactly one of pid_file or pattern"},
		{strings.Replace(good, `etcd-2: {kubernetes: {namespace: lb, pod: etcd-1}, pattern: "--initial-cluster-state"}`, `etcd-2: {ssh: {host: h, user: u, key_env: K, known_hosts: kh}, pid_file: /p, start: s}`, 1), "one control plane"},
	} {
		_, err := Load(write(tt.body), cluster.CredentialFamilies())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("want an error saying %q, got %v", tt.want, err)
		}
	}
}
