package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/exitcode"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// startOutside starts a server the way a user's own would run: not
// through the launcher, in a process group of its own, killed at the end.
func startOutside(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	log, _ := os.Create(filepath.Join(t.TempDir(), filepath.Base(name)+".log"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait(); log.Close() })
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := cluster.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitTCP(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("%s never answered", addr)
}

// writeCA makes a CA and a certificate for 127.0.0.1 signed by it.
func writeCA(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lockbench test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	caCert, _ := x509.ParseCertificate(caDER)
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644)
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	return ca, cert, key
}

// TestTargetsFile points the harness at servers it did not start: a Redis
// that requires a password over TLS and an etcd with authentication, both
// started here outside the launcher. The redis and etcd backends run
// against them (a worker instance paused while it holds, too); nothing in
// the results folder holds a credential; faults that would need to run the
// servers are refused before anything starts, and so is a credential whose
// variable is not set.
func TestTargetsFile(t *testing.T) {
	needRedis(t)
	etcdBin, err := cluster.Binary("etcd")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	redisSecret := fmt.Sprintf("redis-secret-%d", time.Now().UnixNano())
	etcdSecret := fmt.Sprintf("etcd-secret-%d", time.Now().UnixNano())
	// The run gets its credentials through its own environment: this
	// test runs beside others and does not set the test process's.
	creds := []string{"LB_TEST_REDIS_PASSWORD=" + redisSecret, "LB_TEST_ETCD_USER=root", "LB_TEST_ETCD_PASSWORD=" + etcdSecret}

	ca, cert, key := writeCA(t, dir)
	rp := freePort(t)
	startOutside(t, "redis-server", "--port", "0", "--tls-port", fmt.Sprint(rp), "--bind", "127.0.0.1", "--tls-cert-file", cert,
		"--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no", "--requirepass", redisSecret, "--save", "", "--appendonly", "no")
	ep, pp := freePort(t), freePort(t)
	startOutside(t, etcdBin, "--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", ep),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", ep), "--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", pp),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", pp), "--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", pp))
	redisAddr, etcdAddr := fmt.Sprintf("127.0.0.1:%d", rp), fmt.Sprintf("127.0.0.1:%d", ep)
	waitTCP(t, redisAddr)
	waitTCP(t, etcdAddr)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdAddr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", etcdSecret); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enable etcd auth: %v", err)
		}
	}
	cli.Close()

	targets := filepath.Join(dir, "targets.yaml")
	os.WriteFile(targets, []byte(fmt.Sprintf(`servers:
  redis-1: %s
  etcd-1: %s
auth:
  redis: {password_env: LB_TEST_REDIS_PASSWORD, tls: {ca_file: %s}}
  etcd: {username_env: LB_TEST_ETCD_USER, password_env: LB_TEST_ETCD_PASSWORD}
`, redisAddr, etcdAddr, ca)), 0o644)
	scen := writeScenario(t, `
name: external
seed: 5
workload: {duration: 4s, instances: 2, clients: 2, hold: {min: 1ms, max: 3ms}, ttl: 2s}
cases:
  - {name: redis, backend: redis}
  - name: redis-pause
    backend: redis
    workload: {hold: {min: 30ms, max: 60ms}}
    faults: [{type: pause, target: holder, at: 1s, for: 2500ms}]
    expect: {violations: true}
  - {name: etcd, backend: etcd, options: {members: 1}}
`)
	out := filepath.Join(dir, "out")
	stdout, stderr, err := runBench(t, creds, "run", "-targets", targets, "-dir", out, scen)
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	var p premises
	defer p.done(t)
	hold := map[string]time.Duration{"redis-pause": 60 * time.Millisecond}
	for _, c := range readSummary(t, out).Cases {
		if c.Check.Status != "ok" {
			t.Errorf("%s: %s, %d acquisitions (%v)", c.Check.Case, c.Check.Status, c.Metrics.Acquisitions, c.Check.Invalid)
		}
		p.acquisitions(t, c, 20, max(hold[c.Check.Case], 3*time.Millisecond))
	}
	// No credential anywhere in the results, whatever the file.
	filepath.Walk(out, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		for _, secret := range []string{redisSecret, etcdSecret} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds a credential", p)
			}
		}
		return nil
	})
	if b, _ := os.ReadFile(filepath.Join(out, "run.json")); !strings.Contains(string(b), "LB_TEST_REDIS_PASSWORD") {
		t.Errorf("run.json does not say which variable held the Redis password")
	}

	kill := writeScenario(t, "name: x\ncases: [{name: k, backend: redis, faults: [{type: kill, target: redis-1, at: 1s, for: 1s}]}]\n")
	if _, _, err := runBench(t, creds, "run", "-targets", targets, "-dir", filepath.Join(dir, "k"), kill); exitcode.Of(err) != exitcode.Config || !strings.Contains(err.Error(), "the targets mode cannot kill and restart servers") {
		t.Errorf("a kill of a server lockbench does not run: %v", err)
	}
	if _, _, err := runBench(t, creds[:2], "validate", "-targets", targets, scen); exitcode.Of(err) != exitcode.Config || !strings.Contains(err.Error(), "LB_TEST_ETCD_PASSWORD is not set") {
		t.Errorf("an unset credential variable: %v", err)
	}
}
