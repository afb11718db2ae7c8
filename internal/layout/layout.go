// Package layout names the files of a results folder and creates the
// folders themselves. The layout is part of lockbench's interface (CI jobs
// and people read these files), so it lives in one place that the
// coordinator, the report writer and the CLI all use:
//
//	results/<UTC time>-<scenario>[-N]/
//	  run.json        scenario text, seed, host, versions, link plan, start-up times
//	  history.jsonl   every event, in time order (package history)
//	  history.tail.jsonl  events not yet ordered when the coordinator died (removed at a normal end)
//	  faults.jsonl    each scheduled fault, the window it was in effect and what was observed
//	  summary.json    per case: verdicts, resource damage, metrics, validity
//	  report.md, report.html, plots (*.png, *.svg), bench.txt
//	  logs/<case>/    server and worker logs
//	results/latest    a symbolic link to the newest run in the folder
//
// A folder is never shared by two runs: New claims a fresh name with an
// atomic mkdir, and an explicit folder that already holds files is refused
// unless the caller asks for it to be cleaned.
package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The files of a results folder.
const (
	RunFile     = "run.json"
	HistoryFile = "history.jsonl"
	// TailFile holds the events the coordinator had received but not yet
	// written in time order (the merge waits for the slowest worker). It is
	// rewritten at every flush and removed when a run ends normally, so
	// that a coordinator killed with SIGKILL loses at most one flush
	// interval of events: `bench check` merges it back.
	TailFile    = "history.tail.jsonl"
	FaultsFile  = "faults.jsonl"
	SummaryFile = "summary.json"
	ReportFile  = "report.md"
	HTMLFile    = "report.html"
	BenchFile   = "bench.txt"
	LogsDir     = "logs"
	// Latest is the link, in a results root, to its newest run.
	Latest = "latest"
)

// Shared, when set (bench run -shared-results), makes a results folder
// readable by every user of the machine (0755, files 0644), as results
// folders used to be. By default one is its user's alone (0700, files
// 0600): it holds the scenario, the servers' logs and what the workers
// and drivers said.
var Shared bool

// DirMode and FileMode are the modes of a results folder's directories and
// files (see Shared).
func DirMode() os.FileMode {
	if Shared {
		return 0o755
	}
	return 0o700
}

// FileMode is the mode of a results folder's files.
func FileMode() os.FileMode {
	if Shared {
		return 0o644
	}
	return 0o600
}

// Seal gives every directory and file under dir the results modes
// (DirMode, FileMode), whatever the umask or the code that wrote them
// made them. A symbolic link is left as it is.
func Seal(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return nil
		case d.IsDir():
			return os.Chmod(p, DirMode())
		default:
			return os.Chmod(p, FileMode())
		}
	})
}

// ErrExists means an explicitly named results folder already holds files.
var ErrExists = errors.New("results folder already exists and is not empty")

// New creates a fresh results folder under root named after the time and
// the scenario; when that name is taken (two runs in the same second) it
// appends -2, -3, ... The name is claimed with mkdir, which fails when the
// folder exists, so two concurrent runs never share one.
func New(root, scenario string, now time.Time) (string, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("create results root %s: %w", root, err)
	}
	base := filepath.Join(root, now.UTC().Format("20060102-150405")+"-"+scenario)
	for i := 1; i < 1000; i++ {
		dir := base
		if i > 1 {
			dir = fmt.Sprintf("%s-%d", base, i)
		}
		err := os.Mkdir(dir, DirMode())
		if err == nil {
			return dir, os.Chmod(dir, DirMode()) // not the umask's
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("create results folder: %w", err)
		}
	}
	return "", fmt.Errorf("create results folder: %s-2 .. -999 all exist", base)
}

// Claim prepares an explicitly named results folder: it creates it, or
// accepts it when empty. A folder that holds files is refused with
// ErrExists, unless clean is set, in which case its contents are removed
// first (old plots and logs must never mix with a new run's).
func Claim(dir string, clean bool) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create results folder: %w", err)
		}
		return os.Chmod(dir, DirMode())
	case err != nil:
		return fmt.Errorf("results folder %s: %w", dir, err)
	case len(entries) == 0:
		return os.Chmod(dir, DirMode())
	case !clean:
		return fmt.Errorf("%s: %w (pass -clean to replace its contents, or choose another folder)", dir, ErrExists)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("clean results folder: %w", err)
		}
	}
	return os.Chmod(dir, DirMode())
}

// LinkLatest points root/latest at dir (relative, so the root can move).
// Failing to update the link is not worth failing a run for; the error is
// returned for the caller to report.
func LinkLatest(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return err
	}
	link := filepath.Join(root, Latest)
	tmp := link + fmt.Sprintf(".tmp%d", os.Getpid())
	os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("link %s: %w", link, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("link %s: %w", link, err)
	}
	return nil
}
