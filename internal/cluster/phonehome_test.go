package cluster

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
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

// TestConsulPhonesNobody starts a real Consul cluster: each agent says
// its update check and its anonymous signature are off. Whether anything
// a run starts reaches outside its addresses is watched packet by packet,
// DNS included, over a whole run on every kind of server, by
// cmd/bench's TestRunPhonesNobody (a watch of a few seconds here could not
// have seen Consul's check, which comes within 30 s of an agent's start).
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
		for _, off := range []string{"DisableUpdateCheck", "DisableAnonymousSignature"} {
			if self.DebugConfig[off] != true {
				t.Errorf("%s: %s is %v", sp.Name, off, self.DebugConfig[off])
			}
		}
	}
}
