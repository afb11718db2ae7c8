package control

import (
	"strings"
	"testing"
)

// TestCheck: a control section says what it lacks, field by field.
func TestCheck(t *testing.T) {
	ssh := SSH{Host: "10.0.0.5", User: "root", KeyEnv: "K", KnownHosts: "kh"}
	for _, tt := range []struct {
		name string
		s    Section
		want string // "" when valid
	}{
		{"ssh with a pid file", Section{SSH: ssh, PidFile: "/run/x.pid", Start: "x"}, ""},
		{"ssh with a unit", Section{SSH: ssh, Unit: "redis"}, ""},
		{"nothing", Section{PidFile: "p"}, "give ssh: {host, user, key_env, known_hosts}"},
		{"no key, no host", Section{SSH: SSH{User: "root", KnownHosts: "kh"}, Pattern: "x", Start: "x"}, "ssh.host: missing; ssh.key_env: missing"},
		{"a bad port", Section{SSH: SSH{Host: "h", User: "u", KeyEnv: "K", KnownHosts: "kh", Port: 70000}, Pattern: "x", Start: "x"}, "ssh.port: 70000 is not a port"},
		{"two ways to find the process", Section{SSH: ssh, PidFile: "p", Pattern: "x", Start: "x"}, "give exactly one of pid_file, pattern or unit"},
		{"no start", Section{SSH: ssh, PidFile: "p"}, "start: missing"},
		{"a pod", Section{Kubernetes: &Kubernetes{Namespace: "lb", Pod: "etcd-0"}, Pattern: "etcd"}, ""},
		{"a pod and a host", Section{SSH: ssh, Kubernetes: &Kubernetes{Namespace: "lb", Pod: "etcd-0"}, Pattern: "etcd"}, "give ssh or kubernetes, not both"},
		{"a pod with a start", Section{Kubernetes: &Kubernetes{Namespace: "lb", Pod: "p"}, Pattern: "x", Start: "x"}, "unit and start are for ssh"},
		{"a pod with no name", Section{Kubernetes: &Kubernetes{Namespace: "lb"}, PidFile: "p"}, "kubernetes.pod: missing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Check()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("valid, yet: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSectionFields(t *testing.T) {
	s := &Section{SSH: SSH{Host: "10.0.0.5", Port: 2222}, DataDir: "/var/lib/x"}
	if !s.Has("data_dir") || s.Has("faketime_file") || s.Has("nonsense") {
		t.Error("Has")
	}
	var none *Section
	if none.Has("data_dir") || none.Plane() != "ssh" {
		t.Error("a missing section gives nothing")
	}
	if got := s.SSH.Addr(); got != "10.0.0.5:2222" {
		t.Errorf("Addr = %s", got)
	}
	if got := (SSH{Host: "::1"}).Addr(); got != "[::1]:22" {
		t.Errorf("default port: %s", got)
	}
	k := &Section{Kubernetes: &Kubernetes{}}
	if k.Plane() != "kubernetes" || k.Kubernetes.AgentName() != "lockbench-agent" {
		t.Error("a pod's plane and default agent")
	}
}
