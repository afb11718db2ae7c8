package faults

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockbench/lockbench/history"
)

// Faults that slow a process down without stopping it: the difference
// from a pause (SIGSTOP) is that the process keeps running, so its timers,
// heartbeats and lease keep-alives still fire, only late.
//
//   - cpu-starve: the target's processes get `percent` of one CPU (a cgroup
//     v1 CPU quota), as on an overloaded machine or a noisy neighbour.
//   - disk-stall: the target's writes (and so every fsync) are throttled
//     to `write_iops` on the disk holding its data (a cgroup v1 blkio
//     throttle), as on a failing or saturated disk. Raft and ZooKeeper
//     fsync before acknowledging, so a stalled member cannot commit.
func init() {
	Register(Info{Name: "cpu-starve",
		Example:  Example{Backend: "redis", Fault: "{type: cpu-starve, target: redis-1}"},
		Does:     "the target's processes get `percent` of one CPU (default 2) for the window, through a cgroup CPU quota: it runs, slowly, unlike a pause",
		Observed: "the quota throttled it",
		Action:   ActCPUQuota, Claims: []string{"cgroup:cpu"}, Options: CPUStarveOptions{}, Classes: map[Kind]string{Instance: history.ClassStarve, Server: history.ClassStarveSrv}, Summary: "give a server or instance only `percent` of one CPU for the window (cgroup CPU quota): it runs, slowly",
		Targets: []Kind{Server, Instance}, NeedsCgroup: "cpu", New: newCPUStarve})
	Register(Info{Name: "disk-stall",
		Example:  Example{Backend: "etcd", Fault: "{type: disk-stall, target: etcd-1}"},
		Does:     "the server's writes (and so every fsync) on the disk holding its data throttled to `write_iops` (default 1) for the window, through a cgroup blkio throttle",
		Observed: "writes went through the throttle",
		Action:   ActDiskThrottle, Claims: []string{"cgroup:blkio"}, Options: DiskStallOptions{}, Classes: map[Kind]string{Server: history.ClassDisk}, Summary: "throttle a server's writes and fsyncs to `write_iops` on its data disk for the window (cgroup blkio)",
		Targets: []Kind{Server}, NeedsCgroup: "blkio", New: newDiskStall})
}

// Confined is a target moved into a cgroup of the harness's own.
type Confined interface {
	// Stat reads a counter of the cgroup ("cpu.stat", "nr_throttled").
	Stat(file, key string) (int64, error)
	Undo() error
}

// Confiner is implemented by Envs that can move a target's processes into
// a cgroup (loopback and hosts mode; not containers).
type Confiner interface {
	Confine(t Target, ctrl string, settings [][2]string) (Confined, error)
	// DataDevice is the major:minor of the disk holding a server's data.
	DataDevice(server Target) (string, error)
}

// CPUStarveOptions configure cpu-starve.
type CPUStarveOptions struct {
	Percent float64 `yaml:"percent" doc:"share of one CPU left to the target (default 2)"` // of one CPU, default 2
}

type cpuStarve struct{ o CPUStarveOptions }

func newCPUStarve(decode Decoder) (Fault, error) {
	o := CPUStarveOptions{Percent: 2}
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.Percent < 0.1 || o.Percent >= 100 {
		return nil, fmt.Errorf("percent: %v is not between 0.1 and 100", o.Percent)
	}
	return cpuStarve{o: o}, nil
}

func (f cpuStarve) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	cf, ok := env.(Confiner)
	if !ok {
		return nil, errors.New("cpu-starve cannot confine processes here (containers are not supported)")
	}
	const period = 100000 // µs
	c, err := cf.Confine(target, "cpu", [][2]string{{"cpu.cfs_period_us", fmt.Sprint(period)}, {"cpu.cfs_quota_us", fmt.Sprint(int(f.o.Percent / 100 * period))}})
	if err != nil {
		return nil, err
	}
	return &Effect{
		Seen: fmt.Sprintf("%s limited to %.1f%% of one CPU", target, f.o.Percent),
		Check: func(context.Context) (string, error) {
			n, err := c.Stat("cpu.stat", "nr_throttled")
			if err != nil {
				return "", err
			}
			if n == 0 {
				return "", errors.New("the quota never throttled it: it did not try to use more CPU")
			}
			return fmt.Sprintf("throttled in %d period(s) of 100ms", n), nil
		},
		Heal: func(context.Context) (string, error) { return "", c.Undo() },
	}, nil
}

// DiskStallOptions configure disk-stall.
type DiskStallOptions struct {
	WriteIOPS int `yaml:"write_iops" doc:"writes and fsyncs per second left to the server (default 1)"` // default 1
}

type diskStall struct{ o DiskStallOptions }

func newDiskStall(decode Decoder) (Fault, error) {
	o := DiskStallOptions{WriteIOPS: 1}
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.WriteIOPS < 1 {
		return nil, errors.New("write_iops: must be at least 1")
	}
	return diskStall{o: o}, nil
}

func (f diskStall) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	cf, ok := env.(Confiner)
	if !ok {
		return nil, errors.New("disk-stall cannot confine processes here (containers are not supported)")
	}
	dev, err := cf.DataDevice(target)
	if err != nil {
		return nil, err
	}
	c, err := cf.Confine(target, "blkio", [][2]string{{"blkio.throttle.write_iops_device", fmt.Sprintf("%s %d", dev, f.o.WriteIOPS)}})
	if err != nil {
		return nil, err
	}
	return &Effect{
		Seen: fmt.Sprintf("%s's writes to %s throttled to %d per second", target, dev, f.o.WriteIOPS),
		Check: func(context.Context) (string, error) {
			n, err := c.Stat("blkio.throttle.io_serviced", "Write")
			if err != nil {
				return "", fmt.Errorf("%w: it wrote nothing to the disk while throttled", err)
			}
			if n == 0 {
				return "", errors.New("it wrote nothing to the disk while throttled: the stall was never felt")
			}
			return fmt.Sprintf("%d write(s) went through the throttle", n), nil
		},
		Heal: func(context.Context) (string, error) { return "", c.Undo() },
	}, nil
}
