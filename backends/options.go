package backends

import (
	"fmt"
	"strings"
)

// count defaults *n to def when unset and checks it lies in 1..max: the
// size of a cluster (nodes, members, servers, replicas, sentinels).
func count(field string, n *int, def, max int) error {
	if *n == 0 {
		*n = def
	}
	if *n < 1 || *n > max {
		return fmt.Errorf("%s: %d is outside 1..%d", field, *n, max)
	}
	return nil
}

// oneOf defaults *v to the first allowed value when unset and rejects any
// value not allowed.
func oneOf(field string, v *string, allowed ...string) error {
	if *v == "" {
		*v = allowed[0]
		return nil
	}
	for _, a := range allowed {
		if *v == a {
			return nil
		}
	}
	return fmt.Errorf("%s: %q is not one of %s", field, *v, strings.Join(allowed, ", "))
}

// persistenceModes are a Redis server's persistence options, default first.
var persistenceModes = []string{"none", "everysec", "always"}
