package driver

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// This file finds, for a failed step of the conformance check, the
// option that would fix it: the case's (lease, tokens, extend, acquire,
// start_timeout, answer_grace, env), the driver's command, or the label's.

// fixErr is an error that knows the option that would fix it. Its text is
// the error's alone: where no one asks for a fix (a run), nothing changes.
type fixErr struct {
	err error
	fix string
}

func (e *fixErr) Error() string { return e.err.Error() }
func (e *fixErr) Unwrap() error { return e.err }

// withFix attaches fix to err.
func withFix(err error, fix string) error { return &fixErr{err: err, fix: fix} }

// fixFor is the option that would fix a step's failure err: the one the
// step knew, or one read from what the driver said when it broke (an
// import its interpreter could not make, a hello it did not give in
// time). "" when no option would: the driver, or its library, is wrong.
func (c *checker) fixFor(err error) string {
	var fe *fixErr
	if errors.As(err, &fe) {
		return fe.fix
	}
	msg := err.Error()
	cmd := c.o.Backend.opt.Command
	prog := ""
	if len(cmd) > 0 {
		prog = cmd[0]
	}
	base := filepath.Base(prog)
	switch {
	case strings.Contains(msg, "lockbench_driver"):
		return "import lockbench's protocol helper from the folder LOCKBENCH_DRIVERS names (bench driver path prints it): sys.path.insert(0, os.path.join(os.environ[\"LOCKBENCH_DRIVERS\"], \"python\"))"
	case (strings.Contains(msg, "ModuleNotFoundError") || strings.Contains(msg, "ImportError")) && strings.HasPrefix(base, "python") && prog != python:
		return fmt.Sprintf("run it on Debian's interpreter, where the python3-* packages live: %s instead of %s (bench driver check ... -- %s my_driver.py; in a case, command: [%s, my_driver.py]): a python3 earlier on the PATH, pyenv's or a virtualenv's, does not see them", python, prog, python, python)
	case strings.Contains(msg, "Cannot find module") && base == "node" && c.o.Backend.opt.Env["NODE_PATH"] == "":
		return "Debian's node modules live in /usr/share/nodejs, which another node (NodeSource's) does not search: env: {NODE_PATH: /usr/share/nodejs:/usr/lib/nodejs}"
	case strings.Contains(msg, "ClassNotFoundException") || strings.Contains(msg, "NoClassDefFoundError"):
		return "put the driver's classes and its library's jars on the class path (Debian's are in /usr/share/java; a jar's manifest names the jars it needs): -cp CLASSES:/usr/share/java/LIBRARY.jar"
	case strings.Contains(msg, "did not answer its hello within"):
		return fmt.Sprintf("a library that connects slowly needs longer: start_timeout (now %s)", c.startTimeout())
	case strings.Contains(msg, "of grace"):
		return "if the library answers, but late (a Python thread's turn on a busy machine): answer_grace (default 2s); if it never does, the driver must answer timeout when timeout_ms runs out, whatever the library is still doing"
	}
	return ""
}

func (c *checker) startTimeout() string {
	if d := c.o.Backend.opt.StartTimeout.D(); d > 0 {
		return d.String()
	}
	return "30s, the default"
}

// leaseFix says how to tell the check what bounds a grant, when the one
// it assumed (the lease) is not the library's.
func (c *checker) leaseFix() string {
	now := c.o.Backend.opt.Lease
	switch {
	case now == "" && c.o.Backend.ref != nil:
		now = "the reference driver's, by default"
	case now == "":
		now = "ttl, the default"
	}
	return fmt.Sprintf("the check took the lease to be %s (lease: %s); if the library's is not that, say what bounds a grant: -options '{lease: 10s}' (a session timeout), or '{lease: none}' for a lock held until it is released", c.lease, now)
}
