package cluster

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockbench/lockbench/internal/machinery/cgroup"
	"github.com/lockbench/lockbench/internal/machinery/powerfs"
)

// Power loss and full disks: with Options.DiskLayer, every server's data dir is a
// powerfs layer over a backing dir of its own (under the run's data dir,
// in ".disk"), so a power-loss fault can kill the server and discard what
// it wrote and never fsynced before it restarts on what was durable. The
// layer is mounted when the server's dir is made and unmounted at Close;
// a run that died leaves its mounts to CleanStale, which detaches them
// before it removes the dir.

// mountPower puts the server's data dir on a powerfs layer.
func (c *Cluster) mountPower(s *Server) error {
	back := filepath.Join(c.dataDir, ".disk", s.Spec.Name)
	if err := os.MkdirAll(back, 0o755); err != nil {
		return fmt.Errorf("backing dir for %s: %w", s.Spec.Name, err)
	}
	fs, err := powerfs.Mount(back, s.Dir)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Spec.Name, err)
	}
	s.power = fs
	return nil
}

// PowerLoss kills the named server and discards every write it made and
// never fsynced; Restart then starts it on what was durable.
func (c *Cluster) PowerLoss(name string) (powerfs.Loss, error) {
	s := c.Server(name)
	if s == nil {
		return powerfs.Loss{}, fmt.Errorf("power loss: no server %q", name)
	}
	if s.power == nil {
		return powerfs.Loss{}, fmt.Errorf("power loss: %s was started without a power-loss layer", name)
	}
	k, ok := c.place.(killer)
	if !ok {
		return powerfs.Loss{}, c.lacks("kill", name)
	}
	if err := k.kill(s); err != nil {
		return powerfs.Loss{}, err
	}
	loss, err := s.power.Lose()
	if err != nil {
		return loss, fmt.Errorf("power loss on %s: %w", name, err)
	}
	return loss, nil
}

// settlePower makes durable what the servers wrote until they answered
// (Start): a power loss takes what a server wrote in its last moments and
// never fsynced, not its bootstrap (an initdb --no-sync, a cluster's
// first configuration), which a machine's writeback (dirty pages are
// written within 30 s on Linux) would have made durable long before.
func (c *Cluster) settlePower() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.servers {
		if s.power != nil {
			s.power.Settle()
		}
	}
}

// SettlePower makes durable what the servers wrote so far: for state a
// case makes once its servers answer that a long-lived deployment would
// have had long before (a broker's stream and its consumer), so that a
// power loss takes what the case wrote after it, not its bootstrap.
func (c *Cluster) SettlePower() { c.settlePower() }

// DiskFull makes the named server's disk full (every write to its data
// dir fails with ENOSPC) or frees it; it returns the writes refused since
// the last call.
func (c *Cluster) DiskFull(name string, full bool) (int64, error) {
	s := c.Server(name)
	if s == nil {
		return 0, fmt.Errorf("disk full: no server %q", name)
	}
	if s.power == nil {
		return 0, fmt.Errorf("disk full: %s was started without a disk layer", name)
	}
	return s.power.SetFull(full), nil
}

// DiskRefused is how many writes the named server's full disk refused so
// far.
func (c *Cluster) DiskRefused(name string) (int64, error) {
	s := c.Server(name)
	if s == nil || s.power == nil {
		return 0, fmt.Errorf("disk full: %s has no disk layer", name)
	}
	return s.power.Refused(), nil
}

// unmountPower removes every server's layer (Close).
func (c *Cluster) unmountPower(servers []*Server) []error {
	var errs []error
	for _, s := range servers {
		if s.power == nil {
			continue
		}
		if err := s.power.Unmount(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// PowerAvailable says whether data dirs can be put on a power-loss layer.
func PowerAvailable() error { return powerfs.Available() }

// DataDevice is the major:minor of the disk holding a server's data: its
// data dir here, or the data_dir its control section names on its host.
func (c *Cluster) DataDevice(name string) (string, error) {
	s := c.Server(name)
	if s == nil {
		return "", fmt.Errorf("no server %s", name)
	}
	if p := s.Process(); p != nil && p.Remote() != nil {
		d, ok := p.Remote().(interface{ DataDevice() (string, error) })
		if !ok {
			return "", fmt.Errorf("%s: its control plane cannot reach its disk", name)
		}
		return d.DataDevice()
	}
	if s.Dir == "" {
		return "", fmt.Errorf("%s has no data directory here", name)
	}
	return cgroup.DeviceOf(s.Dir)
}
