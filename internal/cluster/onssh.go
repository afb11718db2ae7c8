package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/control"
	"github.com/lockbench/lockbench/internal/machinery/faketime"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
	"github.com/lockbench/lockbench/internal/machinery/remote"

	"github.com/lockbench/lockbench/backends"
)

// The SSH mode: a targets file's servers with a control section, acted on
// over SSH on their hosts; the worker instances are this machine's, as in
// the targets mode.
func init() {
	RegisterMode(Mode{Name: ModeSSH, Title: "targets + SSH", Remote: []On{OnServer},
		Offers: map[faults.Action][]On{
			faults.ActSignal: every, faults.ActKill: every, faults.ActCut: every, faults.ActCPUQuota: every,
			faults.ActDiskThrottle: {OnServer}, faults.ActClock: {OnServer}, faults.ActClockRate: {OnServer}, faults.ActProxy: {OnClientLink}},
		Faketime: true, NoEmulatedClock: true,
		ControlNeeds: map[faults.Action]string{faults.ActDiskThrottle: "data_dir", faults.ActClock: "faketime_file", faults.ActClockRate: "faketime_file"},
		Why:          "over SSH lockbench signals, kills and restarts a server's processes, cuts it with iptables, confines it in a cgroup (CPU, disk writes) and moves its libfaketime clock on its host; it does not reach its disk's contents or its data beyond the run's keys, and a server's peer links go through no proxy",
		place: func(c *Cluster, o Options) (placement, error) {
			return newOnSSH(external{found: c.found(o)}, o.Control), nil
		}})
}

// onSSH is the placement of a targets file's servers that have a control
// plane (control.Section): found at the file's addresses like any external
// server, and acted on over SSH on the hosts they run on. Before the first
// case it repairs what a dead run of this machine left on each host (its
// chains, the groups it stopped) and makes sure every controlled server
// runs, unstopped; at Close it removes its chains and leaves every server
// running and resumed. Servers without a control section are as external
// ones: nothing acts on them.
type onSSH struct {
	external
	ctl   map[string]*control.Section
	hosts map[string]*remote.SSHShell // by SSH address
	fws   map[string]*remote.Chain    // by SSH address
	byIP  map[string]string           // a controlled server's IP -> its SSH address
	srv   map[string]*Server          // the controlled servers, by name
	log   func(format string, args ...any)
}

func newOnSSH(ext external, ctl map[string]*control.Section) *onSSH {
	return &onSSH{external: ext, ctl: ctl, hosts: map[string]*remote.SSHShell{}, fws: map[string]*remote.Chain{}, byIP: map[string]string{}, srv: map[string]*Server{},
		log: func(format string, args ...any) { fmt.Fprintf(os.Stderr, "control: "+format+"\n", args...) }}
}

// host is the connection to the host of a controlled server, made (and
// repaired) the first time.
func (o *onSSH) hostOf(ctl *control.Section) (*remote.SSHShell, error) {
	a := ctl.SSH.Addr()
	if h := o.hosts[a]; h != nil {
		return h, nil
	}
	h, err := remote.DialSSH(ctl.SSH)
	if err != nil {
		return nil, err
	}
	did, err := remote.Repair(h, remote.HarnessAlive)
	for _, d := range did {
		o.log("%s (left by a run that is gone)", d)
	}
	if err != nil {
		h.Close()
		return nil, err
	}
	o.hosts[a] = h
	o.fws[a] = remote.NewChain(h, firewall.Name(os.Getpid()))
	return h, nil
}

func (o *onSSH) start(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	if err := o.register(ctx, c, specs, o.attach); err != nil {
		return err
	}
	return awaitLeader(ctx, c, specs)
}

// attach finds a controlled server's process (starting it if a dead run
// left it dead, resuming it if one left it stopped) and watches it.
func (o *onSSH) attach(s *Server) error {
	ctl := o.ctl[s.Spec.Name]
	if ctl == nil {
		return nil
	}
	h, err := o.hostOf(ctl)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Spec.Name, err)
	}
	o.byIP[s.IP] = ctl.SSH.Addr()
	o.srv[s.Spec.Name] = s
	if err := o.restoreClock(h, ctl, remote.HarnessAlive); err != nil {
		return fmt.Errorf("%s: %w", s.Spec.Name, err)
	}
	r, err := remote.Locate(h, ctl, s.Spec.Name)
	if err != nil {
		o.log("%s: %v; starting it", s.Spec.Name, err)
		if r, err = o.startRemote(context.Background(), s, h, ctl); err != nil {
			return err
		}
	}
	p := procgroup.NewRemote(s.Spec.Name, r)
	if stopped, err := p.Stopped(); err == nil && stopped {
		o.log("%s was stopped; resuming it", s.Spec.Name)
		if err := p.Signal(syscall.SIGCONT); err != nil {
			p.Detach()
			return err
		}
	}
	s.setProcess(p)
	return nil
}

// startRemote runs the server's start command and waits until its port
// answers and its process can be found.
func (o *onSSH) startRemote(ctx context.Context, s *Server, h *remote.SSHShell, ctl *control.Section) (*remote.Proc, error) {
	if _, err := remote.RunT(h, remote.StartCmd(ctl)); err != nil {
		return nil, fmt.Errorf("start %s on %s: %w", s.Spec.Name, h, err)
	}
	var r *remote.Proc
	err := poll(ctx, nil, 60*time.Second, func() error {
		conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			return err
		}
		conn.Close()
		r, err = remote.Locate(h, ctl, s.Spec.Name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("start %s on %s: %w", s.Spec.Name, h, err)
	}
	return r, nil
}

func (o *onSSH) controlled(s *Server) (*remote.SSHShell, *control.Section, error) {
	ctl := o.ctl[s.Spec.Name]
	if ctl == nil || s.Process() == nil {
		return nil, nil, fmt.Errorf("%s has no control section in the targets file: lockbench does not act on it", s.Spec.Name)
	}
	return o.hosts[ctl.SSH.Addr()], ctl, nil
}

func (o *onSSH) kill(s *Server) error {
	if _, _, err := o.controlled(s); err != nil {
		return err
	}
	return s.Process().Kill(10 * time.Second)
}

func (o *onSSH) signal(s *Server, sig syscall.Signal) error {
	if _, _, err := o.controlled(s); err != nil {
		return err
	}
	return s.Process().Signal(sig)
}

func (o *onSSH) restart(ctx context.Context, _ *Cluster, s *Server) error {
	h, ctl, err := o.controlled(s)
	if err != nil {
		return err
	}
	if s.Process().Alive() {
		return fmt.Errorf("restart %s: still running", s.Spec.Name)
	}
	r, err := o.startRemote(ctx, s, h, ctl)
	if err != nil {
		return err
	}
	s.setProcess(procgroup.NewRemote(s.Spec.Name, r))
	return nil
}

func (o *onSSH) separable(s *Server) error {
	_, _, err := o.controlled(s)
	return err
}

// drop cuts where it can: in this harness's chain on the host of a
// controlled server the packets leave from, else on the host of the
// controlled server they arrive at (a peer with no control plane sends
// them); a cut from or to a worker instance is made here, by its mark,
// since only this machine can tell its instances apart.
func (o *onSSH) drop(a, b firewall.Endpoint, p float64) (firewall.Cut, error) {
	if a.Mark == 0 && b.Mark == 0 {
		if addr, ok := o.byIP[a.IP]; ok {
			return o.fws[addr].DropSome(a, b, p)
		}
		if addr, ok := o.byIP[b.IP]; ok {
			return o.fws[addr].DropSome(a, b, p)
		}
	}
	return o.fw.DropSome(a, b, p)
}

// release leaves a controlled server running and resumed, restarting one
// a fault left dead, and stops watching it.
func (o *onSSH) release(s *Server) error {
	h, ctl, err := o.controlled(s)
	if err != nil {
		return nil
	}
	p := s.Process()
	var errs []error
	// The server's clock is set right first: a server restarted below
	// starts on it.
	errs = append(errs, o.restoreClock(h, ctl, func(pid int) bool { return pid != os.Getpid() }))
	if !p.Alive() {
		if _, err := o.startRemote(context.Background(), s, h, ctl); err != nil {
			errs = append(errs, err)
		}
	} else if stopped, err := p.Stopped(); err == nil && stopped {
		errs = append(errs, p.Signal(syscall.SIGCONT))
	}
	p.Detach()
	return errors.Join(errs...)
}

// close removes this harness's chains from every host.
func (o *onSSH) close() error {
	var errs []error
	for a, f := range o.fws {
		errs = append(errs, f.Close())
		errs = append(errs, o.hosts[a].Close())
	}
	return errors.Join(errs...)
}

// jumpClock moves a controlled server's wall clock by d more, in the
// faketime file its libfaketime reads on its host (control.Section.FaketimeFile):
// its processes see the jump at their next clock read.
func (o *onSSH) jumpClock(name string, d time.Duration) error {
	h, ctl, fc, err := o.fakeClock(name)
	if err != nil {
		return fmt.Errorf("clock jump: %w", err)
	}
	fc.Offset += d.Seconds()
	return o.writeFakeClock(h, ctl, fc)
}

// driftClock sets the pace of a controlled server's wall clock, with no
// step (as locally: libfaketime scales the time since the process
// started, which the host's /proc gives).
func (o *onSSH) driftClock(name string, rate float64) error {
	h, ctl, fc, err := o.fakeClock(name)
	if err != nil {
		return fmt.Errorf("clock drift: %w", err)
	}
	out, err := remote.RunT(h, fmt.Sprintf("cut -d' ' -f1 /proc/uptime; sed 's/.*) //' /proc/%d/stat | cut -d' ' -f20", o.serverPid(name)))
	f := strings.Fields(out)
	if err != nil || len(f) != 2 {
		return fmt.Errorf("clock drift on %s: the process's age on %s: %v (%q)", name, h, err, out)
	}
	up, err1 := strconv.ParseFloat(f[0], 64)
	start, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("clock drift on %s: the process's age on %s: %q", name, h, out)
	}
	return o.writeFakeClock(h, ctl, fc.WithRate(rate, up-start/faketime.ClockTicks))
}

// serverPid is a controlled server's main pid on its host.
func (o *onSSH) serverPid(name string) int {
	if s := o.srv[name]; s != nil && s.Process() != nil {
		return s.Process().Pid()
	}
	return 0
}

// fakeClock reads a controlled server's faketime file ("+0" when it is
// not there yet).
func (o *onSSH) fakeClock(name string) (remote.Shell, *control.Section, faketime.Clock, error) {
	ctl := o.ctl[name]
	if ctl == nil || ctl.FaketimeFile == "" {
		return nil, nil, faketime.Clock{}, fmt.Errorf("%s's control section gives no faketime_file", name)
	}
	h, err := o.hostOf(ctl)
	if err != nil {
		return nil, nil, faketime.Clock{}, err
	}
	out, err := remote.RunT(h, "cat "+remote.Quote(ctl.FaketimeFile)+" 2>/dev/null || echo +0")
	if err != nil {
		return nil, nil, faketime.Clock{}, err
	}
	fc, err := faketime.Parse(strings.TrimSpace(out))
	return h, ctl, fc, err
}

// writeFakeClock writes the server's faketime file, keeping what it said
// before this run first wrote it beside it (<file>.lockbench-<pid>): at
// release, or at a later run's start after this one was killed, the
// file is put back, so that no server's clock stays moved by a run.
func (o *onSSH) writeFakeClock(h remote.Shell, ctl *control.Section, fc faketime.Clock) error {
	f := remote.Quote(ctl.FaketimeFile)
	keep := remote.Quote(fmt.Sprintf("%s.lockbench-%d", ctl.FaketimeFile, os.Getpid()))
	_, err := remote.RunT(h, fmt.Sprintf("{ [ -e %[2]s ] || { if [ -e %[1]s ]; then cp %[1]s %[2]s; else echo +0 > %[2]s; fi; }; } && printf '%%s\\n' %[3]s > %[1]s", f, keep, remote.Quote(fc.String())))
	return err
}

// restoreClock puts back the server's faketime file as it was before the
// runs that wrote it and are gone (gone says which: dead harnesses at a
// run's start; this one at release).
func (o *onSSH) restoreClock(h remote.Shell, ctl *control.Section, gone func(pid int) bool) error {
	if ctl.FaketimeFile == "" {
		return nil
	}
	out, err := remote.RunT(h, "for f in "+remote.Quote(ctl.FaketimeFile)+".lockbench-*; do [ -e \"$f\" ] && echo \"$f\"; done; true")
	if err != nil {
		return fmt.Errorf("restore the clock of %s: %w", h, err)
	}
	var errs []error
	for _, kept := range strings.Fields(out) {
		pid, err := strconv.Atoi(kept[strings.LastIndexByte(kept, '-')+1:])
		if err != nil || !gone(pid) {
			continue
		}
		if _, err := remote.RunT(h, fmt.Sprintf("mv %s %s", remote.Quote(kept), remote.Quote(ctl.FaketimeFile))); err != nil {
			errs = append(errs, err)
			continue
		}
		if pid != os.Getpid() {
			o.log("set the clock in %s on %s back (left moved by a run that is gone)", ctl.FaketimeFile, h)
		}
	}
	return errors.Join(errs...)
}
