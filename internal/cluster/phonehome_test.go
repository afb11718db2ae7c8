package cluster

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/procgroup"
)

// TestConsulUpdateCheckIsOff: every Consul agent the harness starts has its
// update check (the phone-home a DNS query to an outside resolver gave
// away) and its anonymous signature off.
func TestConsulUpdateCheckIsOff(t *testing.T) {
	for _, want := range []string{"-hcl=disable_update_check = true", "-hcl=disable_anonymous_signature = true"} {
		if !slices.Contains(consulNoPhoneHome, want) {
			t.Errorf("Consul agents are started without %s", want)
		}
	}
}

// TestConsulPhonesNobody starts a real Consul cluster: each agent says its
// update check is off, and for a few seconds after it is healthy no
// server holds a connection to an address outside the run's slot (but
// the harness's own, from 127.0.0.1).
func TestConsulPhonesNobody(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Consul cluster")
	}
	if _, err := consulBinary(); err != nil {
		t.Skip(err)
	}
	be, err := backends.New("consul", func(any) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	c, err := New("phonehome", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Start(ctx, be.Servers()); err != nil {
		t.Fatal(err)
	}
	for _, sp := range be.Servers() {
		s := c.Server(sp.Name)
		resp, err := http.Get("http://" + s.Addr + "/v1/agent/self")
		if err != nil {
			t.Fatal(err)
		}
		var self struct {
			DebugConfig map[string]any
		}
		json.NewDecoder(resp.Body).Decode(&self)
		resp.Body.Close()
		if self.DebugConfig["DisableUpdateCheck"] != true {
			t.Errorf("%s: DisableUpdateCheck is %v", sp.Name, self.DebugConfig["DisableUpdateCheck"])
		}
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, sp := range be.Servers() {
			p := c.Server(sp.Name).Process()
			conns, err := procgroup.Connections(p.Pid())
			if err != nil {
				if _, gone := os.Stat("/proc/" + strconv.Itoa(p.Pid())); gone != nil {
					t.Fatalf("%s exited", sp.Name)
				}
				continue
			}
			for _, a := range conns {
				host, _, _ := net.SplitHostPort(a)
				// 127.0.0.1: the harness's own clients (this test's, the
				// readiness checks), which do not bind a source address.
				if !c.Slot.Contains(host) && host != "127.0.0.1" {
					t.Errorf("%s holds a connection to %s, outside the run's slot", sp.Name, a)
				}
			}
		}
	}
}
