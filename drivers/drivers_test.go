package drivers

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDir: the drivers are written once, whole, to a folder named by their
// content, the scripts executable.
func TestDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	once.Lock()
	dirDone = ""
	once.Unlock()
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"python/lockbench_driver.py", "python/redis_lock.py", "python/kazoo_lock.py", "python/etcd3_lock.py", "node/lockbench_driver.js", "node/lease.js", "java/LockbenchDriver.java", "java/CuratorDriver.java", ".complete"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "python/redis_lock.py")); err != nil || st.Mode()&0o100 == 0 {
		t.Errorf("redis_lock.py is not executable: %v", err)
	}
	sum, _ := hash()
	if filepath.Base(dir) != sum {
		t.Errorf("folder %s is not named by the content's hash %s", dir, sum)
	}
	again, err := Dir()
	if err != nil || again != dir {
		t.Errorf("second Dir: %s, %v", again, err)
	}
	if _, err := exec.LookPath("javac"); err != nil {
		t.Skip("no javac: make setup installs it")
	}
	classes, err := JavaClasses()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(classes, "CuratorDriver.class")); err != nil {
		t.Errorf("the Java driver was not compiled: %v", err)
	}
}
