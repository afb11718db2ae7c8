package remote

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/lockbench/lockbench/internal/machinery/firewall"
)

// Chain is this harness's chain on one host, jumped to from the
// host's OUTPUT: a cut from a server on that host is made where its
// packets leave.
type Chain struct {
	h     Shell
	chain string

	mu      sync.Mutex
	created bool
	next    int
}

// NewChain is the harness's chain named chain on the host h: nothing is
// made there until the first rule.
func NewChain(h Shell, chain string) *Chain { return &Chain{h: h, chain: chain} }

func (f *Chain) ipt(args ...string) (string, error) {
	return RunT(f.h, "iptables -w "+strings.Join(args, " "))
}

func (f *Chain) ensure() error {
	if f.created {
		return nil
	}
	if _, err := f.ipt("-N", f.chain); err != nil {
		return err
	}
	// From OUTPUT for what the host's server sends; from INPUT (not on
	// lo: no packet is seen twice) for what a server with no control
	// plane sends it, which only the receiving host can drop.
	for _, jump := range [][]string{append([]string{"-I", "OUTPUT"}, firewall.JumpOut(f.chain)...), append([]string{"-I", "INPUT"}, firewall.JumpIn(f.chain)...)} {
		if _, err := f.ipt(jump...); err != nil {
			removeChain(f.h, f.chain)
			return err
		}
	}
	f.created = true
	return nil
}

// DropSome drops each packet from src to dst with probability p.
func (f *Chain) DropSome(src, dst firewall.Endpoint, p float64) (firewall.Cut, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.ensure(); err != nil {
		return nil, err
	}
	f.next++
	r := &rule{f: f, comment: fmt.Sprintf("lockbench-%d", f.next)}
	r.spec = firewall.Spec(src, dst, p, r.comment)
	if _, err := f.ipt(append([]string{"-A", f.chain}, r.spec...)...); err != nil {
		return nil, err
	}
	return r, nil
}

// Close removes the jump, the rules and the chain.
func (f *Chain) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.created {
		return nil
	}
	f.created = false
	return removeChain(f.h, f.chain)
}

func removeChain(h Shell, chain string) error {
	_, err := RunT(h, firewall.RemoveScript(chain))
	return err
}

type rule struct {
	f       *Chain
	spec    []string
	comment string
}

func (r *rule) Undo() error {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if !r.f.created {
		return nil
	}
	_, err := r.f.ipt(append([]string{"-D", r.f.chain}, r.spec...)...)
	return err
}

func (r *rule) Packets() (int64, error) {
	out, err := r.f.ipt("-L", r.f.chain, "-v", "-x", "-n")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "/* "+r.comment+" */") {
			if f := strings.Fields(line); len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("rule %s not found in %s on %s", r.comment, r.f.chain, r.f.h)
}
