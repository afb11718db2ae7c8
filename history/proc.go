package history

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Instance is a worker instance's number, 1-based: the application
// replica that a scenario's fault target names "instance-2" and whose
// processes the history names "i2" and "i2c0". It is the one type for
// that number: every name below is written and read here.
type Instance int

// instancePrefix begins an instance's name as a scenario writes it.
const instancePrefix = "instance-"

// String is the instance as a scenario's target writes it: "instance-2".
func (n Instance) String() string { return instancePrefix + strconv.Itoa(int(n)) }

// ParseInstance reads an instance's name ("instance-2"). The number is
// at least 1 and written without sign or leading zeros, so that the name
// round-trips through String.
func ParseInstance(s string) (Instance, error) {
	d, ok := strings.CutPrefix(s, instancePrefix)
	if !ok {
		return 0, fmt.Errorf("%q is not an instance (instance-N)", s)
	}
	n, err := ordinal(d)
	if err != nil {
		return 0, fmt.Errorf("%q is not an instance (instance-N): %w", s, err)
	}
	return Instance(n), nil
}

// Proc names a process of the history (Event.Proc): a client of an
// instance, "i2c0" (instance 2's client 0), or the instance as a whole,
// "i2" (a crash, a dropped attempt).
type Proc struct {
	Instance Instance
	// Client is the client's number within its instance, from 0; Whole
	// (-1) stands for the instance itself.
	Client int
}

// Whole is the Client of a Proc that names a whole instance.
const Whole = -1

// ClientProc names client c of instance n.
func ClientProc(n Instance, c int) Proc { return Proc{Instance: n, Client: c} }

// InstanceProc names instance n as a whole.
func InstanceProc(n Instance) Proc { return Proc{Instance: n, Client: Whole} }

// IsClient reports whether p names one client rather than an instance.
func (p Proc) IsClient() bool { return p.Client != Whole }

// String is the process's name in the history: "i2c0", or "i2".
func (p Proc) String() string {
	if !p.IsClient() {
		return "i" + strconv.Itoa(int(p.Instance))
	}
	return "i" + strconv.Itoa(int(p.Instance)) + "c" + strconv.Itoa(p.Client)
}

// ParseProc reads a process's name ("i2c0" or "i2"), as String writes it.
func ParseProc(s string) (Proc, error) {
	rest, ok := strings.CutPrefix(s, "i")
	if !ok {
		return Proc{}, fmt.Errorf("%q is not a process (iN or iNcM)", s)
	}
	inst, client, isClient := strings.Cut(rest, "c")
	n, err := ordinal(inst)
	if err != nil {
		return Proc{}, fmt.Errorf("%q is not a process (iN or iNcM): instance: %w", s, err)
	}
	if !isClient {
		return InstanceProc(Instance(n)), nil
	}
	c, err := strconv.Atoi(client)
	if err != nil || c < 0 || strconv.Itoa(c) != client {
		return Proc{}, fmt.Errorf("%q is not a process (iN or iNcM): client %q", s, client)
	}
	return ClientProc(Instance(n), c), nil
}

// ordinal reads a number of at least 1 written without sign or leading
// zeros.
func ordinal(d string) (int, error) {
	n, err := strconv.Atoi(d)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is not a number", d)
	case n < 1:
		return 0, errors.New("numbers start at 1")
	case strconv.Itoa(n) != d:
		return 0, fmt.Errorf("%q: write the number without sign or leading zeros", d)
	}
	return n, nil
}
