package driver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// envFake makes the test binary a fake driver of the mode it names: a
// driver that works (an in-memory lock), or one that breaks in one way.
const envFake = "LOCKBENCH_FAKE_DRIVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envFake); mode != "" {
		fakeDriver(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeCommand is the command line of a fake driver of mode.
func fakeConfig(t *testing.T, mode string) Config {
	t.Helper()
	return Config{Name: "fake-" + mode, Command: []string{os.Args[0]}, Env: []string{envFake + "=" + mode},
		StartTimeout: time.Minute, Grace: 300 * time.Millisecond, Hello: Hello{TTLMs: 1000, Namespace: "lockbench"}}
}

// fakeDriver serves the protocol on stdin and stdout. Its lock is a map
// in memory; the mode says how it misbehaves:
//
//	good          behaves
//	refuse        refuses its options at hello
//	leak          prints its LEAK_TOKEN on stderr and in its refusal
//	silent        never answers its hello
//	garbage       answers the second acquire with a line that is not JSON
//	hang          never answers an acquire of key "hang"
//	crash         exits on the first acquire
//	wrong-id      answers an acquire with an id it was not asked
//	twice         answers the first acquire twice
//	no-token      says it has tokens, gives none
//	stray-lost    says lost of a lease it never gave
//	long-line     writes a line longer than MaxLine
//	one-client    serves one client per process
//	flood         after its first lease, says lost of it without end
//	flood-hello   floods lost signals right after its hello
//	setsid        starts a child in a session of its own, then behaves
//	stderr-flood  writes a 2 MB line and 3 MB more on stderr, then behaves
func fakeDriver(mode string) {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 64<<10), 4<<20)
	out := json.NewEncoder(os.Stdout)
	var mu sync.Mutex
	send := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		out.Encode(v)
	}
	if !in.Scan() {
		return
	}
	switch mode {
	case "refuse":
		send(map[string]any{"type": "error", "code": "options", "message": "no option frob"})
		return
	case "leak":
		tok := os.Getenv("LEAK_TOKEN")
		fmt.Fprintf(os.Stderr, "connecting with token %s to redis://user:%s@127.0.0.1:6379\n", tok, tok)
		send(map[string]any{"type": "error", "code": "options", "message": "the server refused token " + tok})
		return
	case "silent":
		time.Sleep(time.Hour)
	}
	ab := map[string]any{"token": mode == "good" || mode == "no-token", "extend": true, "lost": true, "acquire": []string{"try", "wait"}, "concurrent": mode != "one-client"}
	send(map[string]any{"type": "hello", "protocol": 1, "library": "fake", "version": "1.0", "abilities": ab})
	switch mode {
	case "flood-hello":
		for {
			send(map[string]any{"type": "lost", "client": 0, "lease": "x"})
		}
	case "setsid":
		c := exec.Command("setsid", "sleep", "300")
		c.Start()
	case "stderr-flood":
		os.Stderr.WriteString(strings.Repeat("y", 2<<20) + "\n")
		for i := 0; i < 30000; i++ {
			fmt.Fprintln(os.Stderr, "noise line", i, strings.Repeat("z", 80))
		}
	}
	holder := map[string]string{} // key -> lease
	owner := map[string]string{}  // lease -> key
	var token uint64
	acquires := 0
	for in.Scan() {
		var req Request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "bad request:", err)
			continue
		}
		switch req.Type {
		case TypePing:
			send(map[string]any{"type": "ok", "id": req.ID})
			continue
		case TypeAcquire:
			acquires++
			switch {
			case mode == "crash":
				fmt.Fprintln(os.Stderr, "fake driver: crashing on purpose")
				os.Exit(7)
			case mode == "garbage" && acquires == 2:
				fmt.Println("{this is not json")
				continue
			case mode == "hang" && req.Key == "hang":
				continue
			case mode == "wrong-id":
				send(map[string]any{"type": "ok", "id": req.ID + 100, "lease": "x"})
				continue
			case mode == "long-line":
				fmt.Printf("{\"type\":\"ok\",\"id\":%d,\"lease\":\"%s\"}\n", req.ID, strings.Repeat("x", MaxLine+10))
				continue
			case mode == "stray-lost":
				send(map[string]any{"type": "lost", "client": req.Client, "lease": "never-given"})
			}
			mu.Lock()
			_, held := holder[req.Key]
			mu.Unlock()
			if held {
				send(map[string]any{"type": "error", "id": req.ID, "code": "held"})
				continue
			}
			if req.Key == "unknown" {
				send(map[string]any{"type": "error", "id": req.ID, "code": "unavailable", "message": "link down"})
				continue
			}
			if req.Key == "unsent" {
				send(map[string]any{"type": "error", "id": req.ID, "code": "unavailable", "effect": "unsent", "message": "dial tcp: connection refused"})
				continue
			}
			if req.Key == "refused" {
				send(map[string]any{"type": "error", "id": req.ID, "code": "unavailable", "effect": "none", "message": "connection refused"})
				continue
			}
			token++
			lease := fmt.Sprintf("L%d", token)
			mu.Lock()
			holder[req.Key], owner[lease] = lease, req.Key
			mu.Unlock()
			ok := map[string]any{"type": "ok", "id": req.ID, "lease": lease}
			if mode == "good" {
				ok["token"] = token
			}
			send(ok)
			if mode == "twice" && acquires == 1 {
				send(ok)
			}
			if mode == "flood" {
				for {
					send(map[string]any{"type": "lost", "client": req.Client, "lease": lease})
				}
			}
			if req.Key == "lose-me" {
				c := req.Client
				go func() {
					time.Sleep(50 * time.Millisecond)
					send(map[string]any{"type": "lost", "client": c, "lease": lease, "message": "gone"})
				}()
			}
		case TypeRelease, TypeExtend:
			mu.Lock()
			key, ok := owner[req.Lease]
			if ok && req.Type == TypeRelease {
				delete(owner, req.Lease)
				delete(holder, key)
			}
			mu.Unlock()
			if !ok {
				send(map[string]any{"type": "error", "id": req.ID, "code": "not_held"})
				continue
			}
			send(map[string]any{"type": "ok", "id": req.ID})
		default:
			send(map[string]any{"type": "error", "id": req.ID, "code": "unsupported"})
		}
	}
}
