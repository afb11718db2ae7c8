// Package control is a targets file's control section: for a server
// lockbench did not start, how it reaches the machine the server runs on
// (a host over SSH, or a Kubernetes pod) and how it finds (and, over SSH,
// starts) its process there. It is configuration only: package remote
// acts on it, the cluster's ssh and kubernetes modes use it.
package control

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Section is how lockbench acts on a server it did not start (a targets
// file's control section, by server name): the host it runs on, reached
// over SSH, or the Kubernetes pod it runs in; and how to find (and, over
// SSH, start) its process there. Through it the server faults act on
// remote servers as on local ones (which ones: each mode's Offers).
//
//	control:
//	  redis-1:
//	    ssh: {host: 10.0.0.5, port: 22, user: root, key_env: LB_SSH_KEY, known_hosts: ./known_hosts}
//	    pid_file: /run/redis/redis.pid        # or pattern: "redis-server .*:6379", or unit: redis-server
//	    start: "redis-server /etc/redis/redis.conf --daemonize yes"   # a unit's start is systemctl start
//	  etcd-1:
//	    kubernetes: {namespace: lockbench, pod: etcd-0}   # agent: lockbench-agent, kubeconfig, context
//	    pattern: "etcd --name"
//
// Over SSH, pause and resume are SIGSTOP and SIGCONT of the server's
// process group, kill and restart SIGKILL of the group then Start, cuts
// iptables rules in a chain of this harness's own on the host
// (LOCKBENCH-<pid>, as locally). The key comes from the environment
// variable key_env names (the key itself, or a path to it), never from
// the file; host keys are checked against the known_hosts file the user
// names, and an unknown or changed host key refuses the connection. In
// Kubernetes, see Kubernetes.
type Section struct {
	SSH        SSH         `yaml:"ssh" json:"ssh,omitempty"`
	Kubernetes *Kubernetes `yaml:"kubernetes" json:"kubernetes,omitempty"`
	// PidFile, Pattern or Unit finds the server's main process: a pid
	// file on the host, a pgrep -f pattern (the oldest match), or a
	// systemd unit's MainPID. Exactly one.
	PidFile string `yaml:"pid_file" json:"pid_file,omitempty"`
	Pattern string `yaml:"pattern" json:"pattern,omitempty"`
	Unit    string `yaml:"unit" json:"unit,omitempty"`
	// Start is the shell command that starts the server on the host
	// (restarts after a kill, and the repair of a server a killed run
	// left dead); with Unit, systemctl start when empty.
	Start string `yaml:"start" json:"start,omitempty"`
	// DataDir is the server's data directory on the host: a disk stall
	// throttles the writes to the disk that holds it. Optional; without
	// it, no disk fault reaches the server.
	DataDir string `yaml:"data_dir" json:"data_dir,omitempty"`
	// FaketimeFile, over SSH, is the file the server's libfaketime reads
	// its clock from: the start command runs the server with
	// LD_PRELOAD=<libfaketime.so.1>, FAKETIME_TIMESTAMP_FILE=<this file>,
	// FAKETIME_NO_CACHE=1 and DONT_FAKE_MONOTONIC=1, as lockbench does
	// locally. A clock fault writes its offset (and pace) there.
	// Optional; without it, no clock fault reaches the server.
	FaketimeFile string `yaml:"faketime_file" json:"faketime_file,omitempty"`
}

// Has reports whether the control section gives field (a yaml name:
// "data_dir"), which some actions need (Mode.ControlNeeds).
func (c *Section) Has(field string) bool {
	switch field {
	case "data_dir":
		return c != nil && c.DataDir != ""
	case "faketime_file":
		return c != nil && c.FaketimeFile != ""
	}
	return false
}

// SSH says how to reach a host.
type SSH struct {
	Host       string `yaml:"host" json:"host"`
	Port       int    `yaml:"port" json:"port,omitempty"`
	User       string `yaml:"user" json:"user"`
	KeyEnv     string `yaml:"key_env" json:"key_env"`
	KnownHosts string `yaml:"known_hosts" json:"known_hosts"`
}

// Plane is the control plane the section uses: "ssh" or "kubernetes".
func (c *Section) Plane() string {
	if c != nil && c.Kubernetes != nil {
		return "kubernetes"
	}
	return "ssh"
}

// Check says what is wrong with a control section, or nil.
func (c *Section) Check() error {
	if c.Kubernetes != nil {
		return c.checkKubernetes()
	}
	if c.SSH == (SSH{}) {
		return errors.New("give ssh: {host, user, key_env, known_hosts} (a host lockbench reaches over SSH) or kubernetes: {namespace, pod} (a pod)")
	}
	var errs []string
	if c.SSH.Host == "" {
		errs = append(errs, "ssh.host: missing")
	}
	if c.SSH.User == "" {
		errs = append(errs, "ssh.user: missing")
	}
	if c.SSH.KeyEnv == "" {
		errs = append(errs, "ssh.key_env: missing (the environment variable holding the private key, or its path)")
	}
	if c.SSH.KnownHosts == "" {
		errs = append(errs, "ssh.known_hosts: missing (host keys are always checked)")
	}
	if c.SSH.Port < 0 || c.SSH.Port > 65535 {
		errs = append(errs, fmt.Sprintf("ssh.port: %d is not a port", c.SSH.Port))
	}
	n := 0
	for _, s := range []string{c.PidFile, c.Pattern, c.Unit} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		errs = append(errs, "give exactly one of pid_file, pattern or unit (how the server's process is found)")
	}
	if c.Start == "" && c.Unit == "" {
		errs = append(errs, "start: missing (the command that starts the server, for restarts)")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// Addr is the host's SSH address (host:port).
func (s SSH) Addr() string {
	port := s.Port
	if port == 0 {
		port = 22
	}
	return net.JoinHostPort(s.Host, strconv.Itoa(port))
}

// Kubernetes says where in a Kubernetes cluster a targets file's server
// runs: its pod, and the agent container in that pod that lockbench runs
// its shell commands in (a container with a shell and procps sharing the
// pod's process namespace: kube/lockbench.yaml gives every server pod
// one). Through the Kubernetes API (client-go, in a bench built with
// -tags kubernetes): a pause is SIGSTOP and SIGCONT of the server's
// process group from the agent, seen in the pod's /proc as over SSH; a
// kill deletes the pod at once (its containers get SIGKILL) and its
// StatefulSet makes it again, seen by the pod's uid; a cut between two
// servers is a Chaos Mesh NetworkChaos, seen as Chaos Mesh records it in
// force (checker/MODEL.md §10); a clock jump a TimeChaos, seen by asking
// the server its time. Cuts of a worker instance are made where the
// instances run, as with any targets file.
type Kubernetes struct {
	Namespace string `yaml:"namespace" json:"namespace"`
	Pod       string `yaml:"pod" json:"pod"`
	// Agent is the agent container's name (default lockbench-agent).
	Agent string `yaml:"agent" json:"agent,omitempty"`
	// Kubeconfig and Context choose the cluster: by default the pod's
	// own service account when bench runs in the cluster, else
	// $KUBECONFIG or ~/.kube/config.
	Kubeconfig string `yaml:"kubeconfig" json:"kubeconfig,omitempty"`
	Context    string `yaml:"context" json:"context,omitempty"`
}

// AgentName is the agent container's name.
func (k *Kubernetes) AgentName() string {
	if k.Agent == "" {
		return "lockbench-agent"
	}
	return k.Agent
}

func (c *Section) checkKubernetes() error {
	var errs []string
	k := c.Kubernetes
	if c.SSH != (SSH{}) {
		errs = append(errs, "give ssh or kubernetes, not both")
	}
	if k.Namespace == "" {
		errs = append(errs, "kubernetes.namespace: missing")
	}
	if k.Pod == "" {
		errs = append(errs, "kubernetes.pod: missing (the server's pod)")
	}
	if (c.PidFile == "") == (c.Pattern == "") {
		errs = append(errs, "give exactly one of pid_file or pattern (how the agent finds the server's process in the pod)")
	}
	if c.Unit != "" || c.Start != "" {
		errs = append(errs, "unit and start are for ssh: in Kubernetes the pod's controller starts the server again")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
