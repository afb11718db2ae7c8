package layout

import (
	"errors"
	"os"
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
