package links

import (
	"context"
	"fmt"
	"net"
)

// RefuseLookups makes every name lookup of this process fail without a
// packet sent (its /etc/hosts still answers). For a process whose every
// address is an IP the harness gave, a DNS query can only be a library
// reaching outside the run: go-redis's sentinel client looks up its
// placeholder address "FailoverClient" at every start (its endpoint type
// detection), a query to the machine's resolver that TestRunPhonesNobody
// caught (issue 41: nothing a run starts may reach outside its own
// addresses).
func RefuseLookups() {
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(_ context.Context, network, address string) (net.Conn, error) {
		return nil, fmt.Errorf("no name lookups from this process: every address of the run is an IP (a query to %s/%s refused)", address, network)
	}}
}

// AllIPs reports whether every address given (host:port, or a bare host)
// names its host by an IP address; empty ones are skipped.
func AllIPs(addrs ...string) bool {
	for _, a := range addrs {
		if a == "" {
			continue
		}
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			host = a
		}
		if net.ParseIP(host) == nil {
			return false
		}
	}
	return true
}
