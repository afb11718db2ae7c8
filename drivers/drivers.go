// Package drivers holds lockbench's reference drivers (docs/drivers.md):
// the lock recipe of one client library each, behind the driver protocol,
// run with the library's Debian package. Their sources are embedded in
// bench; Dir writes them to a cache folder of their own content's hash,
// once per machine, and JavaClasses compiles the Java one there (make
// setup does both ahead, with `bench driver build`).
package drivers

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

//go:embed python/*.py node/*.js java/*.java
var sources embed.FS

// JavaClassPath is what the Java driver compiles and runs against: Debian's
// jars (their manifests name the jars they need in turn) and the compiled
// driver.
var JavaClassPath = []string{
	"/usr/share/java/curator-recipes.jar",
	"/usr/share/java/jackson-databind.jar",
	"/usr/share/java/slf4j-simple.jar",
}

var (
	once    sync.Mutex
	dirDone string
)

// Dir returns the folder holding the drivers' sources, writing it if it
// is not there yet: <user cache>/lockbench/drivers/<hash of the sources>.
func Dir() (string, error) {
	once.Lock()
	defer once.Unlock()
	if dirDone != "" {
		return dirDone, nil
	}
	sum, err := hash()
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("drivers: no cache folder: %w", err)
	}
	dir := filepath.Join(base, "lockbench", "drivers", sum)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		dirDone = dir
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("drivers: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), sum+".tmp-")
	if err != nil {
		return "", fmt.Errorf("drivers: %w", err)
	}
	defer os.RemoveAll(tmp)
	err = fs.WalkDir(sources, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := sources.ReadFile(p)
		if err != nil {
			return err
		}
		out := filepath.Join(tmp, p)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(string(b), "#!") {
			mode = 0o755
		}
		return os.WriteFile(out, b, mode)
	})
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644)
	}
	if err != nil {
		return "", fmt.Errorf("drivers: write %s: %w", tmp, err)
	}
	// Another process may have written the same folder meanwhile: its
	// content is the same.
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, ".complete")); serr != nil {
			return "", fmt.Errorf("drivers: %w", err)
		}
	}
	dirDone = dir
	return dir, nil
}

// JavaClasses returns the folder of the compiled Java driver, compiling it
// with javac the first time.
func JavaClasses() (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	classes := filepath.Join(dir, "java", "classes")
	if _, err := os.Stat(filepath.Join(classes, ".complete")); err == nil {
		return classes, nil
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		return "", fmt.Errorf("drivers: the Java driver needs javac (make setup installs default-jdk-headless): %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Join(dir, "java"), "classes.tmp-")
	if err != nil {
		return "", fmt.Errorf("drivers: %w", err)
	}
	defer os.RemoveAll(tmp)
	srcs, _ := filepath.Glob(filepath.Join(dir, "java", "*.java"))
	args := append([]string{"-nowarn", "-d", tmp, "-cp", strings.Join(JavaClassPath, ":")}, srcs...)
	if out, err := exec.Command(javac, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("drivers: javac: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, classes); err != nil {
		if _, serr := os.Stat(filepath.Join(classes, ".complete")); serr != nil {
			return "", fmt.Errorf("drivers: %w", err)
		}
	}
	return classes, nil
}

// hash is the first 12 hex digits of the sources' SHA-256.
func hash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(sources, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := sources.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
