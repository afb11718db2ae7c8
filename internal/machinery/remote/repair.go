package remote

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/lockbench/lockbench/internal/machinery/cgroup"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
)

// HarnessAlive reports whether the harness of pid runs on this machine
// (this one, or another that still runs).
func HarnessAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return pid == os.Getpid() || err == nil || errors.Is(err, syscall.EPERM)
}

// notesCmd makes (when missing) and prints the directory the harness
// notes the groups it stopped in, on a host: /run/lockbench/stopped for
// root, ~/.cache/lockbench/stopped for another user. It must be the
// user's own, mode 0700, and neither it nor its parent a symbolic link,
// so no other user of the host can plant, read or redirect a note; it
// fails otherwise. (The notes used to be /tmp/lockbench-stopped-*: any
// user could write those.)
const notesCmd = `umask 077; if [ "$(id -u)" = 0 ]; then d=/run/lockbench/stopped; else d="${HOME:?}/.cache/lockbench/stopped"; fi; ` +
	`{ mkdir -p -m 755 -- "${d%/*}" && { [ -d "$d" ] || mkdir -m 700 -- "$d"; }; } || exit 1; for x in "$d" "${d%/*}"; do if [ -L "$x" ] || [ "$(stat -c %u -- "$x")" != "$(id -u)" ]; then echo "notes directory $x: not a directory of $(id -un)'s own" >&2; exit 1; fi; done; ` +
	`if [ "$(stat -c %a -- "$d")" != 700 ]; then echo "notes directory $d: mode $(stat -c %a -- "$d"), not 700" >&2; exit 1; fi; printf '%s\n' "$d"`

// NotesDir makes sure the host's notes directory exists, safely (see
// notesCmd), and returns its path.
func NotesDir(h Shell) (string, error) {
	out, err := RunT(h, notesCmd)
	if err != nil {
		return "", fmt.Errorf("notes directory on %s: %w", h, err)
	}
	d := strings.TrimSpace(out)
	if !filepath.IsAbs(d) || strings.ContainsAny(d, "\n\x00") {
		return "", fmt.Errorf("notes directory on %s: %q is not a path", h, d)
	}
	return d, nil
}

// noteName names the note of group pgid stopped by harness pid: digits
// and a dash, nothing a shell could read as more.
func noteName(pid, pgid int) string { return fmt.Sprintf("%d-%d", pid, pgid) }

// noteRe is the only note name Repair acts on.
var noteRe = regexp.MustCompile(`^([0-9]{1,10})-([0-9]{1,10})$`)

// Repair undoes what harnesses that are no longer running (alive
// says which are) left on a host: their iptables chains, and the process groups
// they stopped (resumed, and their notes removed). A host is driven from
// one control machine at a time: a chain or note of a pid not running here
// is a dead run's. Nothing of a note is run: its name must be two numbers,
// its content the second, and the commands are made of those numbers
// alone; notes only the harness's user can write are read (NotesDir).
// What it did is returned, one line each.
func Repair(h Shell, alive func(pid int) bool) ([]string, error) {
	dir, err := NotesDir(h)
	if err != nil {
		return nil, fmt.Errorf("repair %s: %w", h, err)
	}
	out, err := RunT(h, "iptables -w -S | sed -n 's/^-N "+firewall.ChainPrefix+"\\([0-9]*\\)$/chain \\1/p'; "+
		"for f in "+Quote(dir)+"/*; do [ -f \"$f\" ] && [ ! -L \"$f\" ] && printf 'note %s %s\\n' \"${f##*/}\" \"$(head -c 32 -- \"$f\" | tr -cd 0-9)\"; done; "+
		"n=0; for f in /tmp/lockbench-stopped-*; do [ -e \"$f\" ] && n=$((n+1)); done; [ $n = 0 ] || echo \"untrusted $n\"; "+
		"for d in "+cgroup.Root+"/cpu/"+cgroup.Prefix+"* "+cgroup.Root+"/blkio/"+cgroup.Prefix+"*; do [ -d \"$d\" ] && echo \"cgroup $d\"; done; true")
	if err != nil {
		return nil, fmt.Errorf("repair %s: %w", h, err)
	}
	var did []string
	var errs []error
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "chain":
			pid, err := strconv.Atoi(f[1])
			if err != nil || alive(pid) {
				continue
			}
			if err := removeChain(h, firewall.ChainPrefix+f[1]); err != nil {
				errs = append(errs, err)
				continue
			}
			did = append(did, fmt.Sprintf("removed chain %s%s on %s", firewall.ChainPrefix, f[1], h))
		case len(f) == 2 && f[0] == "cgroup":
			var pid, n int
			ctrl, name, _ := strings.Cut(strings.TrimPrefix(f[1], cgroup.Root+"/"), "/")
			if _, err := fmt.Sscanf(name, cgroup.Prefix+"%d-%d", &pid, &n); err != nil || alive(pid) {
				continue
			}
			if err := (&confinement{h: h, ctrl: ctrl, dir: f[1]}).Undo(); err != nil {
				errs = append(errs, err)
				continue
			}
			did = append(did, fmt.Sprintf("removed cgroup %s on %s", f[1], h))
		case len(f) == 2 && f[0] == "untrusted":
			did = append(did, fmt.Sprintf("ignored %s file(s) /tmp/lockbench-stopped-* on %s: notes anyone can write are never acted on", f[1], h))
		case len(f) >= 2 && f[0] == "note":
			d, err := repairNote(h, dir, f[1], strings.Join(f[2:], ""), alive)
			if err != nil {
				errs = append(errs, err)
			}
			if d != "" {
				did = append(did, d)
			}
		}
	}
	return did, errors.Join(errs...)
}

// repairNote resumes the group a dead harness noted it stopped, and
// removes the note; a note that is not one the harness writes is
// removed and said so, never acted on.
func repairNote(h Shell, dir, name, content string, alive func(pid int) bool) (string, error) {
	path := dir + "/" + name
	m := noteRe.FindStringSubmatch(name)
	var pid, pgid int
	if m != nil {
		pid, _ = strconv.Atoi(m[1])
		pgid, _ = strconv.Atoi(m[2])
	}
	if m == nil || pgid <= 1 || content != m[2] {
		if _, err := RunT(h, "rm -f -- "+Quote(path)); err != nil {
			return "", fmt.Errorf("remove malformed note %q on %s: %w", path, h, err)
		}
		return fmt.Sprintf("removed malformed note %q on %s (not acted on)", path, h), nil
	}
	if alive(pid) {
		return "", nil
	}
	if _, err := RunT(h, fmt.Sprintf("kill -CONT -- -%d; rm -f -- %s", pgid, Quote(path))); err != nil && !Exited(err) {
		return "", fmt.Errorf("resume process group %d on %s: %w", pgid, h, err)
	}
	return fmt.Sprintf("resumed process group %d on %s and removed its note", pgid, h), nil
}
