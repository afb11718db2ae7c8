// Package report turns judged histories into what people and CI read:
// per-case metrics (latency from HdrHistogram, throughput, availability
// before, during and after each fault), rows (a case, or its trials joined,
// with Wilson intervals on how often two holders were seen), the decision
// view (backends × classes of fault), summary.json, report.md and
// report.html, plots (gonum/plot), bench.txt for benchstat, the results
// index, and bench compare's statistics.
//
// It reads only the public record (package history) and the checker's
// verdicts (package checker): Analyze judges a stored history, Stream
// judges one as it is written (bench run prints each case's line as soon
// as its case is judged). Where a results folder's files go is package
// internal/layout's; what a verdict means is checker/MODEL.md's.
package report
