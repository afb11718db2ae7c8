package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/driver"
	"github.com/lockbench/lockbench/drivers"
	"github.com/lockbench/lockbench/internal/exitcode"
)

// TestReferenceDriversConform: each reference driver passes bench driver
// check against its real server, with its library's Debian package (make
// setup installs them). Side by side: each check is a process of its own
// on an address slot of its own.
func TestReferenceDriversConform(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test (real servers): not with -short")
	}
	// The Java driver is compiled once, before the checks run side by side.
	if _, err := drivers.JavaClasses(); err != nil {
		t.Fatalf("build the Java driver (make setup installs javac): %v", err)
	}
	for _, name := range driver.ReferenceNames() {
		t.Run(name, func(t *testing.T) {
			integration(t)
			start := time.Now()
			out, errb, err := runBench(t, nil, "driver", "check", "-o", t.TempDir(), name)
			if err != nil {
				t.Fatalf("bench driver check %s: %v\n%s%s", name, err, out, errb)
			}
			if !strings.Contains(out, ", 0 failed,") || strings.Contains(out, "✗") {
				t.Errorf("bench driver check %s:\n%s", name, out)
			}
			// A step the check could not make on a machine this busy
			// (its probe's every window timed out) is a premise unmet,
			// not a pass: say so with its figures.
			if strings.Contains(out, "machine too slow") {
				t.Skipf("bench driver check %s: a step's timing premise went unmet at its widest window:\n%s", name, out)
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "(before: ") {
					t.Logf("a probe widened on this machine: %s", strings.TrimSpace(line))
				}
			}
			t.Logf("%s conforms in %s", name, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// brokenDrivers are drivers that break in each way a driver can, as shell
// scripts: each case must end invalid, its reason naming the driver and
// what it did, and no process of it may outlive the run.
const brokenDrivers = `
name: broken-drivers
seed: 3
workload: {duration: 2s, instances: 1, clients: 1, ttl: 2s, acquire_timeout: 1s, hold: {min: 1ms, max: 2ms}}
cases:
  - name: garbage
    backend: "driver:garbage"
    options: {server: redis, command: [sh, -c, 'read h; echo "$HELLO"; read r; echo "this is not json"; exec sleep 60'], env: {MARK: "%[1]s", HELLO: '%[2]s'}}
  - name: hang
    backend: "driver:hang"
    options: {server: redis, command: [sh, -c, 'read h; echo "$HELLO"; exec sleep 60'], env: {MARK: "%[1]s", HELLO: '%[3]s'}, answer_grace: 500ms}
  - name: crash
    backend: "driver:crash"
    options: {server: redis, command: [sh, -c, 'read h; echo "$HELLO"; read r; echo "out of memory" >&2; exit 9'], env: {MARK: "%[1]s", HELLO: '%[4]s'}}
`

// TestBrokenDriverInvalidatesItsCase: a driver that writes garbage, hangs
// or crashes makes its case invalid, with a message naming it, never hung
// and never ✓; and leaves no process behind.
func TestBrokenDriverInvalidatesItsCase(t *testing.T) {
	needRedis(t)
	mark := fmt.Sprintf("broken-drivers-%d-%d", os.Getpid(), time.Now().UnixNano())
	hello := func(lib string) string {
		return `{"type":"hello","protocol":1,"library":"` + lib + `","version":"1","abilities":{"acquire":["try"],"concurrent":true}}`
	}
	dir := filepath.Join(t.TempDir(), "out")
	src := fmt.Sprintf(brokenDrivers, mark, hello("garbage"), hello("hang"), hello("crash"))
	out, errb, err := runInProcess(t, "run", "-dir", dir, writeScenario(t, src))
	if exitcode.Of(err) != exitcode.Invalid {
		t.Fatalf("run: %v, want exit %d (invalid)\n%s%s", err, exitcode.Invalid, out, errb)
	}
	sum := readSummary(t, dir)
	want := map[string]string{
		"garbage": `driver driver:garbage: line 2 of its output, "this is not json": not a protocol message`,
		"hang":    "driver driver:hang: did not answer acquire 1 (client 0, key ",
		"crash":   "driver driver:crash: exited (exit status 9) while lockbench still needed it; its stderr ends: out of memory",
	}
	for _, c := range sum.Cases {
		w, ok := want[c.Check.Case]
		if !ok {
			continue
		}
		delete(want, c.Check.Case)
		if c.Check.Status != "invalid" || !strings.Contains(strings.Join(c.Check.Invalid, "\n"), w) {
			t.Errorf("%s: status %s, invalid because %q; want invalid because %q", c.Check.Case, c.Check.Status, c.Check.Invalid, w)
		}
	}
	for name := range want {
		t.Errorf("case %s is missing from the results", name)
	}
	// No process of any driver is left.
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		if env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil && bytes.Contains(env, []byte("MARK="+mark+"\x00")) {
			t.Errorf("process %d of a broken driver outlived the run", pid)
		}
	}
}
