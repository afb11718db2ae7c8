package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockbench/lockbench/history"
)

// promote makes a PostgreSQL standby the primary (pg_promote()), as a
// failover does once the old primary is gone. Whatever lived only in the
// old primary's memory (every advisory lock and its holder's session) is
// not on the new one.
func init() {
	Register(Info{Name: "promote",
		Example:  Example{Backend: "postgres", Options: "{standby: true}", Fault: "{type: promote, target: postgres-2}"},
		Does:     "`pg_promote()`: the standby becomes the primary, the failover step (with `standby: true`)",
		Observed: "it left recovery",
		Action:   ActAdmin, Claims: []string{ClaimProcess}, Classes: map[Kind]string{Server: history.ClassFailover}, Lasting: true, Summary: "promote a PostgreSQL standby to primary (pg_promote()): the failover step",
		Targets: []Kind{Server}, Instant: true, Asks: AskPromote, New: newPromote})
}

type promote struct{}

func newPromote(decode Decoder) (Fault, error) {
	var none struct{}
	if err := decode(&none); err != nil {
		return nil, err
	}
	return promote{}, nil
}

func (promote) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	addr, kind, err := env.Server(target)
	if err != nil {
		return nil, err
	}
	if !kind.Promote || kind.Speaks != ProtoPostgres {
		return nil, fmt.Errorf("promote %s: its kind (%s) declares no standby a fault can promote through the %s protocol", target, kind.Name, ProtoPostgres)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgConnect(cctx, env, addr)
	if err != nil {
		return nil, fmt.Errorf("promote %s: %w", target, err)
	}
	defer conn.Close(context.Background())
	var standby bool
	if err := conn.QueryRow(cctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
		return nil, fmt.Errorf("promote %s: %w", target, err)
	}
	if !standby {
		return nil, fmt.Errorf("promote %s: it is not a standby", target)
	}
	var done bool
	if err := conn.QueryRow(cctx, "SELECT pg_promote(true, 10)").Scan(&done); err != nil {
		return nil, fmt.Errorf("promote %s: %w", target, err)
	}
	if err := conn.QueryRow(cctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
		return nil, fmt.Errorf("promote %s: %w", target, err)
	}
	if !done || standby {
		return nil, errors.New("promote: the standby did not leave recovery within 10s")
	}
	return &Effect{Seen: target.String() + " left recovery: it is the primary now", Heal: noHeal}, nil
}
