package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/suggest"
)

// command is one subcommand: its flags, its positional arguments and what
// it does. Commands are built afresh for each invocation (the CLI runs in
// process in tests), their flags bound in the closure that builds them.
//
// The conventions every command follows: -h, -help and --help print the
// usage on stdout and exit 0; flags may come before or after the
// positional arguments ("--" ends the flags); a misspelt flag or command
// gets a "did you mean"; bad usage exits 104.
type command struct {
	name    string
	args    string // positional synopsis: "SCENARIO.yaml", "[DIR]"
	summary string // one line, for bench -h
	long    string // paragraphs after the usage line
	hidden  bool
	// min and max bound the positional arguments (max -1: no bound).
	min, max int
	fs       *flag.FlagSet
	exec     func(ctx context.Context, io cmdIO, args []string) error
}

// cmdIO is what a command reads and writes.
type cmdIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func newCommand(name, args, summary string, min, max int) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed by parse
	fs.Usage = func() {}
	return &command{name: name, args: args, summary: summary, min: min, max: max, fs: fs}
}

// usage writes the command's help.
func (c *command) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: bench %s", c.name)
	hasFlags := false
	c.fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprint(w, " [flags]")
	}
	if c.args != "" {
		fmt.Fprint(w, " "+c.args)
	}
	fmt.Fprintf(w, "\n\n%s\n", c.summary)
	if c.long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.long))
	}
	if hasFlags {
		fmt.Fprint(w, "\nFlags:\n")
		c.fs.SetOutput(w)
		c.fs.PrintDefaults()
		c.fs.SetOutput(io.Discard)
	}
	fmt.Fprint(w, "\nFlags may come before or after the arguments; -- ends them.\n")
}

// errHelp stops a command that printed its help: exit 0.
var errHelp = errors.New("help printed")

// parse reads flags wherever they are among the arguments and returns the
// positional ones.
func (c *command) parse(args []string, stdout io.Writer) ([]string, error) {
	var rest []string
	for i, a := range args {
		if a == "--" {
			rest = args[i+1:]
			args = args[:i]
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			c.usage(stdout)
			return nil, errHelp
		}
	}
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, exitcode.With(c.flagError(err), exitcode.Config)
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	pos = append(pos, rest...)
	switch {
	case len(pos) < c.min || (c.max >= 0 && len(pos) > c.max):
		return nil, exitcode.With(fmt.Errorf("%s takes %s; got %d argument(s) (bench %s -h for help)", c.name, c.argCount(), len(pos), c.name), exitcode.Config)
	}
	return pos, nil
}

// argCount says how many positional arguments the command takes.
func (c *command) argCount() string {
	switch {
	case c.min == 0 && c.max == 0:
		return "no arguments"
	case c.min == c.max && c.min == 1:
		return "exactly one argument (" + c.args + ")"
	case c.min == c.max:
		return fmt.Sprintf("exactly %d arguments (%s)", c.min, c.args)
	case c.max < 0:
		return fmt.Sprintf("at least %d argument(s) (%s)", c.min, c.args)
	}
	return fmt.Sprintf("%d to %d argument(s) (%s)", c.min, c.max, c.args)
}

// flagError adds a "did you mean" to an unknown flag.
func (c *command) flagError(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		c.fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		name = strings.TrimPrefix(name, "-")
		return fmt.Errorf("%s%s (bench %s -h for the flags)", msg, suggest.Hint(name, names), c.name)
	}
	return fmt.Errorf("%s (bench %s -h for help)", msg, c.name)
}

// commands returns every subcommand, in the order of bench -h.
func commands() []*command {
	return []*command{runCmd(), validateCmd(), checkCmd(), reportCmd(), indexCmd(), tableCmd(), compareCmd(), agreeCmd(), huntCmd(), replayCmd(), listCmd(), perfCmd(), driverCmd(), versionCmd(), workerCmd(), toxiproxyCmd()}
}

// mainUsage writes bench -h.
func mainUsage(w io.Writer, cmds []*command) {
	fmt.Fprint(w, "bench: benchmark and chaos-test distributed locks\n\nUsage: bench <command> [flags] [arguments]\n\nCommands:\n")
	width := 0
	for _, c := range cmds {
		if !c.hidden && len(c.name)+len(c.args)+1 > width {
			width = len(c.name) + len(c.args) + 1
		}
	}
	for _, c := range cmds {
		if !c.hidden {
			fmt.Fprintf(w, "  %-*s  %s\n", width, c.name+" "+c.args, c.summary)
		}
	}
	fmt.Fprint(w, "\nRun 'bench <command> -h' for a command's flags; 'bench --version' for the version.\n\n")
	fmt.Fprint(w, exitCodes)
}

var exitCodes = exitcode.Help()

// run dispatches a subcommand. It is the whole CLI, testable in process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmds := commands()
	if len(args) == 0 {
		mainUsage(stderr, cmds)
		return exitcode.With(errors.New("no command given"), exitcode.Config)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		mainUsage(stdout, cmds)
		return nil
	case "-version", "--version":
		args = []string{"version"}
	}
	var names []string
	for _, c := range cmds {
		if c.name == args[0] {
			pos, err := c.parse(args[1:], stdout)
			if errors.Is(err, errHelp) {
				return nil
			}
			if err != nil {
				return err
			}
			return c.exec(ctx, cmdIO{stdin: stdin, stdout: stdout, stderr: stderr}, pos)
		}
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	sort.Strings(names)
	return exitcode.With(fmt.Errorf("unknown command %q%s (commands: %s; bench -h for help)", args[0], suggest.Hint(args[0], names), strings.Join(names, ", ")), exitcode.Config)
}
