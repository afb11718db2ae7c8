package faults

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/wait"
	"github.com/redis/go-redis/v9"
)

// memory-pressure fills a Redis server up to its maxmemory with keys of
// other data, and keeps writing them while in force, as an application
// sharing the server with a cache does. What Redis then does is its
// maxmemory-policy's: an eviction policy evicts keys, and one may be a
// lock key or its fencing counter, long before its TTL (a second client
// then acquires: redis #9105, RedLock.net #101, spring-integration
// #11044); noeviction refuses every write that needs memory (OOM), so
// acquisitions fail instead. The fault is seen when the server evicted a
// key or refused a write; heal deletes the filler and sees the server
// below its limit again.
func init() {
	Register(Info{Name: "memory-pressure",
		Example:  Example{Backend: "redis", Fault: "{type: memory-pressure, target: redis-1}"},
		Does:     "fills the server to its `maxmemory` with keys of other data (`value_kb`, default 16) and, every `every_ms` (default 5) for the window, tops it up to its limit again (one-byte values until one is refused or evicts, 1-KiB ones for a larger hole), as a cache sharing the server would; what happens is the server's `maxmemory_policy`: an eviction policy evicts keys (a lock key, or its fencing counter, long before its TTL), `noeviction` refuses writes that need memory (OOM). Heal deletes the filler. A server with no limit is refused (it would only grow); `limit_mb` (default 256) bounds the fill",
		Observed: "the server evicted a key (`evicted_keys` in `INFO stats`) or refused a write (OOM); while in force, how often and for how long at most a top-up found the server with room (from the last time it was seen at its limit): a lapse longer than `max_lapse_ms` (default 100; a busy machine running the filler late), or lapses that add up to more than `max_lapse_pct` of the time in force (default 20: many short ones) and to more than `max_lapse_ms`, is the effect not held, and the case is invalid; at heal, it is below its limit again",
		Action:   ActAdmin, Claims: []string{ClaimProcess, "memory"}, Options: MemoryPressureOptions{}, Classes: map[Kind]string{Server: history.ClassMemory},
		Summary: "fill a Redis server to its maxmemory with other keys and keep writing them (evictions or OOM refusals, per its maxmemory_policy)",
		Targets: []Kind{Server}, Asks: AskMemory, New: newMemoryPressure})
}

// MemoryPressureOptions are the memory-pressure fault's options.
type MemoryPressureOptions struct {
	ValueKB int `yaml:"value_kb" doc:"size of each filler value in KiB (default 16)"`
	// LimitMB bounds what the fault writes before it gives up: a server
	// without a limit (no maxmemory) would only grow.
	LimitMB int `yaml:"limit_mb" doc:"give up after writing this many MiB with neither an eviction nor a refusal (default 256)"`
	// EveryMS is how often a filler value is written while in force.
	EveryMS int `yaml:"every_ms" doc:"while in force, top the server up to its limit again every this many ms (default 5)"`
	// MaxLapseMS bounds how long the server may be found below its limit
	// while in force: a longer lapse (a busy machine that ran the filler
	// late) is the effect not held, and the case is judged so.
	MaxLapseMS int `yaml:"max_lapse_ms" doc:"the longest the server may have had room while in force before the pressure counts as not held (default 100)"`
	// MaxLapsePct bounds the lapses together: many short ones (a filler
	// a little late at every tick) leave the server with room for much
	// of the window though none is long. Judged once they add up to
	// more than MaxLapseMS.
	MaxLapsePct int `yaml:"max_lapse_pct" doc:"the share of the time in force, in percent, the server may have had room in all (once that is past max_lapse_ms) before the pressure counts as not held (default 20)"`
}

type memoryPressure struct{ o MemoryPressureOptions }

func newMemoryPressure(decode Decoder) (Fault, error) {
	var o MemoryPressureOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.ValueKB == 0 {
		o.ValueKB = 16
	}
	if o.LimitMB == 0 {
		o.LimitMB = 256
	}
	if o.EveryMS == 0 {
		o.EveryMS = 5
	}
	if o.MaxLapseMS == 0 {
		o.MaxLapseMS = 100
	}
	if o.MaxLapsePct == 0 {
		o.MaxLapsePct = 20
	}
	switch {
	case o.ValueKB < 0 || o.ValueKB > 64*1024:
		return nil, fmt.Errorf("value_kb: %d is outside 1..65536", o.ValueKB)
	case o.LimitMB < 0:
		return nil, fmt.Errorf("limit_mb: must be positive")
	case o.EveryMS < 0:
		return nil, fmt.Errorf("every_ms: must be positive")
	case o.MaxLapseMS < 0:
		return nil, fmt.Errorf("max_lapse_ms: must be positive")
	case o.MaxLapsePct < 0 || o.MaxLapsePct > 100:
		return nil, fmt.Errorf("max_lapse_pct: %d is outside 1..100", o.MaxLapsePct)
	}
	return memoryPressure{o}, nil
}

// fillerPrefix names the filler keys: nothing of a lock is called so.
const fillerPrefix = "lockbench-filler:"

// redisStats are the INFO figures the fault observes by.
type redisStats struct {
	maxmemory, used int64
	policy          string
	evicted, oom    int64
}

func readStats(ctx context.Context, c *redis.Client) (redisStats, error) {
	info, err := c.Info(ctx, "memory", "stats", "errorstats").Result()
	if err != nil {
		return redisStats{}, err
	}
	var st redisStats
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "maxmemory":
			st.maxmemory, _ = strconv.ParseInt(v, 10, 64)
		case "used_memory":
			st.used, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory_policy":
			st.policy = v
		case "evicted_keys":
			st.evicted, _ = strconv.ParseInt(v, 10, 64)
		case "errorstat_OOM": // count=N,...
			c, _, _ := strings.Cut(strings.TrimPrefix(v, "count="), ",")
			st.oom, _ = strconv.ParseInt(c, 10, 64)
		}
	}
	return st, nil
}

// isOOM reports whether a write was refused for want of memory.
func isOOM(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "OOM ") }

func (m memoryPressure) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	addr, kind, err := env.Server(target)
	if err != nil {
		return nil, err
	}
	if !kind.Memory || kind.Speaks != ProtoRedis {
		return nil, fmt.Errorf("memory-pressure on %s: its kind (%s) declares no memory a fault can fill through the %s protocol", target, kind.Name, ProtoRedis)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 5 * time.Second, PoolSize: 2})
	fail := func(err error) (*Effect, error) {
		c.Close()
		return nil, fmt.Errorf("memory-pressure on %s: %w", target, err)
	}
	before, err := readStats(ctx, c)
	if err != nil {
		return fail(err)
	}
	if before.maxmemory == 0 {
		return fail(fmt.Errorf("the server has no maxmemory: filling it would only grow the process (set the backend's maxmemory option)"))
	}
	big, small := strings.Repeat("x", m.o.ValueKB*1024), "x"
	var n int64
	write := func(v string) error {
		n++
		return c.Set(ctx, fillerPrefix+strconv.FormatInt(n, 10), v, 0).Err()
	}
	// Fill with big values until the server evicts or refuses one, then
	// with one-byte values until it evicts or refuses even those: a write
	// is refused when what the server holds plus the command itself
	// passes maxmemory, so a refused big value leaves room for small
	// writes (a lock's SET among them), and only a refused small one
	// means the server is full.
	limit := int64(m.o.LimitMB) << 20
	var seen string
	value := big
	for written := int64(0); seen == ""; written += int64(len(value)) {
		if written > limit {
			return fail(fmt.Errorf("wrote %d MiB and the server (maxmemory %d bytes, %s) neither evicted a key nor refused a write", written>>20, before.maxmemory, before.policy))
		}
		werr := write(value)
		if werr != nil && !isOOM(werr) {
			return fail(werr)
		}
		st, err := readStats(ctx, c)
		if err != nil {
			return fail(err)
		}
		switch {
		case st.evicted > before.evicted:
			seen = fmt.Sprintf("filled %s to its maxmemory (%d bytes, %s) with %d filler key(s): it evicted %d key(s)", target, st.maxmemory, st.policy, n, st.evicted-before.evicted)
		case isOOM(werr) && value == big:
			value = small
		case isOOM(werr):
			seen = fmt.Sprintf("filled %s to its maxmemory (%d bytes, %s) with %d filler key(s): it refused even a one-byte write (%v)", target, st.maxmemory, st.policy, n, werr)
		}
	}
	// Keep the pressure on: other data goes on arriving, and every tick
	// tops the server up to its limit again, however much room it found
	// (a release's deletion, a client's buffer freed, Redis shrinking a
	// query buffer long after the fill's big writes): one write a tick
	// would leave a hole of tens of KiB open for seconds, and a tick late
	// on a busy machine leaves whatever opened meanwhile. What room the
	// server had, and for how long at most, is counted: a pressure that
	// lapsed is reported, never silently weaker.
	lastEvicted := int64(-1)
	if before.policy != "noeviction" {
		st, err := readStats(ctx, c)
		if err != nil {
			return fail(err)
		}
		lastEvicted = st.evicted
	}
	medium := strings.Repeat("x", 1024)
	// topUp writes until the server refuses a one-byte write or evicts a
	// key for one: room says a write found room first, full that the
	// server was at its limit at the end.
	topUp := func() (room, full bool, err error) {
		useMedium, mediumRefused := false, false
		for i := 0; i < maxTopUpWrites; i++ {
			v := small
			if useMedium {
				v = medium
			}
			werr := write(v)
			switch {
			case werr != nil && !isOOM(werr):
				return room, false, werr
			case isOOM(werr) && useMedium:
				useMedium, mediumRefused = false, true
				continue
			case isOOM(werr):
				return room, true, nil
			}
			if lastEvicted >= 0 {
				st, err := readStats(ctx, c)
				if err != nil {
					return room, false, err
				}
				if st.evicted > lastEvicted {
					lastEvicted = st.evicted
					return room, true, nil
				}
			}
			room = true
			useMedium = i >= 3 && !mediumRefused
		}
		return room, false, nil
	}
	var lapse lapses
	var topUpErr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Duration(m.o.EveryMS) * time.Millisecond)
		defer t.Stop()
		lapse.full = time.Now()
		lapse.since = lapse.full
		for {
			select {
			case <-stop:
				// One last top-up: room a late tick never reached is room
				// all the same, up to the window's end.
				room, full, _ := topUp()
				lapse.saw(room, full, time.Now())
				lapse.end(time.Now())
				return
			case <-t.C:
				room, full, err := topUp()
				if err != nil && topUpErr == nil && ctx.Err() == nil {
					topUpErr = err
				}
				lapse.saw(room, full, time.Now())
			}
		}
	}()
	maxLapse := time.Duration(m.o.MaxLapseMS) * time.Millisecond
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); wg.Wait() }) }
	return &Effect{
		Seen: seen,
		Check: func(ctx context.Context) (string, error) {
			halt()
			st, err := readStats(ctx, c)
			if err != nil {
				return "", err
			}
			held := fmt.Sprintf("while in force: %d key(s) evicted, %d write(s) refused (OOM); %s", st.evicted-before.evicted, st.oom-before.oom, lapse)
			switch {
			case topUpErr != nil:
				return "", fmt.Errorf("the pressure on %s was not kept: a filler write failed (%v); %s", target, topUpErr, held)
			case lapse.longest > maxLapse:
				return "", fmt.Errorf("the pressure on %s lapsed: %s, beyond the %s it may (max_lapse_ms)", target, held, maxLapse)
			case lapse.total > maxLapse && lapse.share() > float64(m.o.MaxLapsePct):
				// In all longer than one lapse may be, and more than the
				// share: a window of a few ms with one short lapse is not.
				return "", fmt.Errorf("the pressure on %s lapsed: %s, in all beyond the %d%% of the %s in force it may (max_lapse_pct)",
					target, held, m.o.MaxLapsePct, lapse.until.Sub(lapse.since).Round(time.Millisecond))
			}
			return held, nil
		},
		Heal: func(ctx context.Context) (string, error) {
			halt()
			defer c.Close()
			var deleted int64
			iter := c.Scan(ctx, 0, fillerPrefix+"*", 512).Iterator()
			var batch []string
			flush := func() error {
				if len(batch) == 0 {
					return nil
				}
				d, err := c.Unlink(ctx, batch...).Result()
				deleted += d
				batch = batch[:0]
				return err
			}
			for iter.Next(ctx) {
				if batch = append(batch, iter.Val()); len(batch) == 256 {
					if err := flush(); err != nil {
						return "", fmt.Errorf("delete the filler on %s: %w", target, err)
					}
				}
			}
			if err := iter.Err(); err != nil {
				return "", fmt.Errorf("delete the filler on %s: %w", target, err)
			}
			if err := flush(); err != nil {
				return "", fmt.Errorf("delete the filler on %s: %w", target, err)
			}
			// UNLINK frees in the background: give it a moment.
			var st redisStats
			below, err := wait.Until(ctx, 20*time.Millisecond, 5*time.Second, func() (bool, error) {
				st, err = readStats(ctx, c)
				return err == nil && st.used < st.maxmemory, err
			})
			if err != nil {
				return "", err
			}
			if !below {
				return "", fmt.Errorf("%s still uses %d bytes of its %d after the filler was deleted", target, st.used, st.maxmemory)
			}
			return fmt.Sprintf("deleted %d filler key(s): %s uses %d of its %d bytes", deleted, target, st.used, st.maxmemory), nil
		},
	}, nil
}

// maxTopUpWrites bounds one tick's writes: enough for a hole of hundreds
// of KiB in 1-KiB values, never a loop against a server that takes
// everything.
const maxTopUpWrites = 512

// lapses counts the times a top-up found the server below its limit, each
// from the last moment it was seen at the limit to the moment it was
// again: an upper bound on how long it had room.
type lapses struct {
	since, until   time.Time // the time in force watched
	full           time.Time // when last seen at its limit
	open           bool      // room was found since
	n              int
	total, longest time.Duration
}

// share is the lapses' total, in percent of the time in force.
func (l *lapses) share() float64 {
	in := l.until.Sub(l.since)
	if in <= 0 {
		return 0
	}
	return 100 * float64(l.total) / float64(in)
}

func (l *lapses) saw(room, full bool, now time.Time) {
	if room {
		l.open = true
	}
	if full {
		l.end(now)
		l.full = now
	}
}

// end closes an open lapse at now, and with it the time watched so far.
func (l *lapses) end(now time.Time) {
	l.until = now
	if !l.open {
		return
	}
	d := now.Sub(l.full)
	l.n++
	l.total += d
	l.longest = max(l.longest, d)
	l.open = false
}

func (l lapses) String() string {
	if l.n == 0 {
		return "kept at its limit throughout"
	}
	return fmt.Sprintf("found with room %d time(s), for at most %s in all (%.0f%% of the time in force), the longest at most %s", l.n, l.total.Round(time.Millisecond), l.share(), l.longest.Round(time.Millisecond))
}
