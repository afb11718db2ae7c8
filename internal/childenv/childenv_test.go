package childenv

import (
	"slices"
	"strings"
	"testing"
)

// TestOnlyWhatIsNeededIsInherited: of an environment with an SSH key, a
// password, a cloud token and the usual variables, a child gets the usual
// ones, lockbench's own, and only the secrets it was given by name.
func TestOnlyWhatIsNeededIsInherited(t *testing.T) {
	env := []string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "LB_SSH_KEY=-----BEGIN OPENSSH PRIVATE KEY-----x",
		"LB_REDIS_PASSWORD=hunter2", "AWS_SECRET_ACCESS_KEY=abc", "PGPASSWORD=pw", "LOCKBENCH_RUN_ID=r1", "PATH=/evil"}
	got := filter(env, []string{"LB_REDIS_PASSWORD", ""})
	want := []string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "LB_REDIS_PASSWORD=hunter2", "LOCKBENCH_RUN_ID=r1"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, kv := range filter(env, nil) {
		for _, secret := range []string{"hunter2", "PRIVATE KEY", "abc", "pw"} {
			if strings.HasSuffix(kv, secret) {
				t.Errorf("a child with no names given inherits %q", kv)
			}
		}
	}
}
