package jobs

import (
	"context"

	"github.com/lockbench/lockbench/backends"
)

// LeaderOptions are the leader strategy's options.
type LeaderOptions struct {
	Fenced bool `yaml:"fenced" doc:"the effect carries the term's token (the leader key's revision, index or czxid) and the sink refuses one below the highest it applied for the job"`
}

// The leader strategy is one strategy over the case's backend, not one per
// server: what it measures is the pattern (a singleton worker: campaign,
// take jobs only while leading, stop when told the term is over), and the
// election is the backend's own ability (backends.Elector: etcd's
// election API, Consul's leader key, ZooKeeper's recipe) on the client,
// session, options and faults the backend already has — as the lock
// strategy is one strategy over every backend's lock.
func init() {
	Register(Info{Name: "leader", Elects: true, Options: LeaderOptions{},
		Summary: "a singleton worker: every client campaigns in the case's backend's leader election (etcd, consul, zookeeper); only the leader takes jobs from the list, until its term is lost; fenced: the effect carries the term's token",
		New: func(decode backends.Decoder) (Strategy, error) {
			var o LeaderOptions
			if err := decode(&o); err != nil {
				return nil, err
			}
			return leaderStrategy{o}, nil
		}})
}

type leaderStrategy struct{ o LeaderOptions }

func (leaderStrategy) Elects() bool { return true }

// Open: the leader reads the list, applies the effect (fenced or not) and
// records the job complete, as the lock strategy's holder does; the
// worker runs the attempt under the client's term.
func (s leaderStrategy) Open(ctx context.Context, env Env) (Executor, error) {
	b, err := open(ctx, env)
	if err != nil {
		return nil, err
	}
	return &lockExec{listExec: listExec{base: b}, fenced: s.o.Fenced}, nil
}

// LeaderElection is the name of the election a case's clients campaign in.
const LeaderElection = "jobs-leader"
