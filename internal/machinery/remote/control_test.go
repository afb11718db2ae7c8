package remote

import (
	"testing"

	"github.com/lockbench/lockbench/internal/control"
)

// TestCommandsOfASection: how a server's process is found and started on
// its host, quoted for the shell.
func TestCommandsOfASection(t *testing.T) {
	for _, tt := range []struct {
		s           control.Section
		find, start string
	}{
		{control.Section{PidFile: "/run/it's.pid", Start: "redis-server /etc/r.conf"}, `cat '/run/it'\''s.pid'`, "redis-server /etc/r.conf"},
		{control.Section{Pattern: "etcd --name etcd-1", Start: "x"}, "pgrep -o -f -- 'etcd --name etcd-1'", "x"},
		{control.Section{Unit: "etcd"}, "systemctl show -p MainPID --value 'etcd'", "systemctl start 'etcd'"},
	} {
		if got := findPID(&tt.s); got != tt.find {
			t.Errorf("find: %s, want %s", got, tt.find)
		}
		if got := StartCmd(&tt.s); got != tt.start {
			t.Errorf("start: %s, want %s", got, tt.start)
		}
	}
}
