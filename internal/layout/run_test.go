package layout

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestRunRoundTrip: what WriteRun writes ReadRun reads back as the same
// value; a run without targets says nothing of them; a folder without
// run.json is os.ErrNotExist, a broken one names the file.
func TestRunRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in := &Run{Scenario: "s", Seed: 7, Started: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Host: Host{CPUs: 2, OS: "linux"},
		Versions: map[string]string{"redis-server": "v"}, Cases: []RunCase{{Name: "a", Slot: 3, Proxied: []string{}, Servers: []string{"redis"}, Reused: "b"}}, Network: "loopback"}
	if err := WriteRun(dir, in); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(dir + "/" + RunFile)
	if strings.Contains(string(b), `"targets"`) {
		t.Errorf("a run without targets wrote them:\n%s", b)
	}
	out, err := ReadRun(dir)
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Errorf("read back %+v, %v; wrote %+v", out, err, in)
	}
	if _, err := ReadRun(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no run.json: %v", err)
	}
	os.WriteFile(dir+"/"+RunFile, []byte("{"), 0o644)
	if _, err := ReadRun(dir); err == nil || !strings.Contains(err.Error(), RunFile) {
		t.Errorf("broken run.json: %v", err)
	}
}

// TestReadFaults: faults.jsonl reads back as the type that wrote it, in
// order; a bad line names its place; a folder without one is ErrNotExist.
func TestReadFaults(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadFaults(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no file: %v", err)
	}
	lines := `{"case":"a","name":"pause-1","type":"pause","target":"holder","resolved":"instance-2","lane":1,"options":{"failover":true},"scheduled_at_ns":1,"scheduled_for_ns":2,"applied":true}` + "\n\n" +
		`{"case":"a","name":"kill-2","type":"kill","target":"redis-1","scheduled_at_ns":3,"scheduled_for_ns":0,"applied":false,"error":"no"}` + "\n"
	os.WriteFile(filepath.Join(dir, FaultsFile), []byte(lines), 0o644)
	got, err := ReadFaults(dir)
	if err != nil || len(got) != 2 || got[0].Resolved != "instance-2" || got[0].Lane != 1 || got[0].Options["failover"] != true || got[1].Error != "no" {
		t.Fatalf("%+v, %v", got, err)
	}
	os.WriteFile(filepath.Join(dir, FaultsFile), []byte(lines+"{bad\n"), 0o644)
	if _, err := ReadFaults(dir); err == nil || !strings.Contains(err.Error(), "faults.jsonl:4") {
		t.Errorf("a bad line: %v", err)
	}
}
