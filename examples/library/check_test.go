// Package library shows lockbench used as a library by a program outside
// its module: it reads a history.jsonl through the public packages
// (history, checker, verdict) and gets a verdict. Being a module of its
// own, it cannot import lockbench's internal packages: if the public API
// needed one, this would not compile.
package library

import (
	"fmt"
	"strings"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/verdict"
)

// A two-client history in which the second client is granted the lock
// while the first, paused past its lease, still believes it holds it.
const twoHolders = `{"t":0,"type":"mark","f":"case-start","meta":{"name":"pause","backend":"redis","fenced":true,"duration_ns":1000000000,"lease_ns":100000000,"expect":{"violations":false},"clients":2,"keys":1}}
{"t":5000000,"type":"invoke","f":"acquire","proc":"i1c0","key":"k0"}
{"t":10000000,"type":"ok","f":"acquire","proc":"i1c0","key":"k0","token":1}
{"t":20000000,"type":"invoke","f":"acquire","proc":"i2c0","key":"k0"}
{"t":160000000,"type":"ok","f":"acquire","proc":"i2c0","key":"k0","token":2}
{"t":240000000,"type":"ok","f":"lost","proc":"i1c0","key":"k0"}
{"t":300000000,"type":"invoke","f":"release","proc":"i2c0","key":"k0"}
{"t":301000000,"type":"ok","f":"release","proc":"i2c0","key":"k0"}
{"t":1000000000,"type":"mark","f":"case-stop"}
{"t":1000000000,"type":"mark","f":"case-end"}
`

// Example_report checks a history the way bench check does: every case,
// its rows and the exit code.
func Example_report() {
	sum, err := verdict.Analyze(history.NewReader(strings.NewReader(twoHolders), "history.jsonl"))
	if err != nil {
		fmt.Println(err)
		return
	}
	c := sum.Cases[0].Check
	// Every type verdict returns is nameable here, outside lockbench.
	var code verdict.ExitCode = sum.ExitCode()
	rows := sum.Verdicts()
	fmt.Println(c.Status, c.Violations, c.OverlapMaxMs, code, code == verdict.ExitViolation, rows[verdict.RowViolation])
	// Output: violation 1 80 100 true 1
}

// Example_checker feeds the checker event by event: the streaming API a
// harness of one's own would use.
func Example_checker() {
	r := history.NewReader(strings.NewReader(twoHolders), "history.jsonl")
	var c *checker.Case
	for r.Next() {
		e := r.Event()
		if e.Type == history.Mark && e.F == history.MarkCaseStart {
			meta, err := checker.MetaOf(e)
			if err != nil {
				fmt.Println(err)
				return
			}
			c = checker.NewCase(meta, e.T, checker.WithLinearizability(0))
			continue
		}
		c.Add(e)
	}
	res := c.Result()
	lin := c.Linearizability(res.Valid)
	fmt.Println(res.MutualExclusion, lin.Verdict, res.Zombies)
	// Output: violation ok 1
}
