// Package worlds is a test-only oracle for the checker: for small
// generated histories it enumerates every world the record allows
// (checker/MODEL.md §0: each unknown outcome took effect or not, and when;
// each ok's instant inside its window; what a lost line may have been),
// builds each world's ground truth directly from lease-lock semantics (the
// service's grants and their expiries, the clients' beliefs), and checks
// that the checker's proven figures and verdicts are the every-world
// answer (A7) and its counted bounds the some-world one.
//
// It restates none of MODEL's rules beyond the axioms: it does not know
// §6's zombie rules or §8's E(g) and R(g); it knows what a lease lock does
// and looks at every world. Everything is in its _test.go files; nothing
// outside tests may import it (internal/layers checks that). See README.md.
package worlds
