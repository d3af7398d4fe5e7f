package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// fault is one row of the matrix: how to inject it, for how long, what
// Weir is expected to do, and the checks of that expectation beyond the
// ones every row makes (recovery after healing, both jobs finished,
// exactly-once output).
type fault struct {
	name   string // the row's key: -rows, the soak's counts
	title  string
	expect string
	hold   time.Duration // how long the fault lasts before healing
	inject injector
	// verify checks the row's own expectation against what was observed.
	verify func(o *observation) error
}

// observation is what the tool saw during one fault.
type observation struct {
	target    string   // what the fault hit
	leaders   []string // leaders seen from just before the fault on
	restarts  int64    // job restarts, both jobs
	redeploys int64    // subtasks started again (a new attempt, or moved), both jobs
	completed int64    // checkpoints completed, both jobs
	failed    int64    // checkpoints failed, both jobs
	reasons   map[string]int
	recovery  time.Duration // healing → a checkpoint of every job triggered after it completed
	stepDown  bool          // the leader before the fault logged its step-down
}

func (o *observation) leaderChanged() bool {
	return len(o.leaders) > 0 && slices.ContainsFunc(o.leaders[1:], func(l string) bool { return l != "" && l != o.leaders[0] })
}

// The expectations the rows share.
func noRestart(o *observation) error {
	if o.restarts != 0 {
		return fmt.Errorf("%d job restarts, want none", o.restarts)
	}
	return nil
}

func restarted(o *observation) error {
	if o.restarts == 0 {
		return fmt.Errorf("no job restarted")
	}
	return nil
}

func failedCheckpoints(o *observation) error {
	if o.failed == 0 {
		return fmt.Errorf("no checkpoint failed")
	}
	return nil
}

func steppedDown(o *observation) error {
	if !o.stepDown {
		return fmt.Errorf("the old leader never logged its step-down")
	}
	if !o.leaderChanged() {
		return fmt.Errorf("leaders seen %v: the other JobManager never led", o.leaders)
	}
	return nil
}

func all(checks ...func(*observation) error) func(*observation) error {
	return func(o *observation) error {
		for _, c := range checks {
			if err := c(o); err != nil {
				return err
			}
		}
		return nil
	}
}

func pick(r *rand.Rand, from []string) string { return from[r.IntN(len(from))] }

// injector starts a fault; its description names what it hit.
type injector func(ctx context.Context, c *cluster, r *rand.Rand) (heal, string, error)

// atLeader aims f at the leading JobManager.
func atLeader(f func(ctx context.Context, c *cluster, leader string) (heal, error)) injector {
	return func(ctx context.Context, c *cluster, _ *rand.Rand) (heal, string, error) {
		l := c.leader(ctx)
		if l == "" {
			return nil, "", fmt.Errorf("no JobManager leads")
		}
		h, err := f(ctx, c, l)
		return h, l, err
	}
}

// atTaskManager aims f at a TaskManager other than the CLI's, chosen by r.
func atTaskManager(f func(ctx context.Context, c *cluster, tm string) (heal, error)) injector {
	return func(ctx context.Context, c *cluster, r *rand.Rand) (heal, string, error) {
		tm := pick(r, faultedTMs)
		h, err := f(ctx, c, tm)
		return h, tm, err
	}
}

var faults = []fault{
	{
		name:   "etcd-member-kill",
		title:  "etcd: one member of three killed",
		expect: "nothing visible: clients use the other members; no restart",
		hold:   20 * time.Second,
		inject: func(ctx context.Context, c *cluster, r *rand.Rand) (heal, string, error) {
			m := pick(r, etcds)
			h, err := kill(ctx, c, m)
			return h, m, err
		},
		verify: noRestart,
	},
	{
		name:  "etcd-quorum-loss",
		title: "etcd: quorum lost (two of three members killed) for 20 s",
		expect: "no checkpoint completes (the ID counter and the completed store are in etcd), the leader steps down " +
			"when its lease ends; when quorum returns a leader recovers the jobs from the last stored checkpoint " +
			"(with no leader reachable, the failed checkpoints are not observable from outside)",
		hold: 20 * time.Second,
		inject: func(ctx context.Context, c *cluster, r *rand.Rand) (heal, string, error) {
			keep := pick(r, etcds)
			var victims []string
			for _, m := range etcds {
				if m != keep {
					victims = append(victims, m)
				}
			}
			h, err := killAll(ctx, c, victims...)
			return h, strings.Join(victims, "+"), err
		},
		verify: func(o *observation) error {
			if !o.stepDown {
				return fmt.Errorf("the leader never logged its step-down")
			}
			return nil
		},
	},
	{
		name:   "etcd-slow",
		title:  "etcd: every member slowed to 5 % of a core for 30 s",
		expect: "checkpoints complete more slowly; no data lost; the leader keeps its lease or hands over cleanly",
		hold:   30 * time.Second,
		inject: func(ctx context.Context, c *cluster, r *rand.Rand) (heal, string, error) {
			h, err := throttle(ctx, c, "0.05", etcds...)
			return h, strings.Join(etcds, "+"), err
		},
	},
	{
		name:  "leader-etcd-partition",
		title: "network: the leader JobManager cut off from etcd (not from TaskManagers) for 30 s",
		expect: "the leader steps down when its lease ends, the other JobManager takes over and recovers the jobs; " +
			"TaskManagers follow the new leader and refuse the old one's fenced requests",
		hold:   30 * time.Second,
		inject: atLeader(func(ctx context.Context, c *cluster, l string) (heal, error) { return partition(ctx, c, l, etcds...) }),
		verify: steppedDown,
	},
	{
		name:   "tm-jobmanager-partition",
		title:  "network: a TaskManager cut off from both JobManagers (not from its peers) for 30 s",
		expect: "the TaskManager is lost at the heartbeat timeout, its subtasks fail over to the others; it registers again after healing",
		hold:   30 * time.Second,
		inject: atTaskManager(func(ctx context.Context, c *cluster, tm string) (heal, error) {
			return partition(ctx, c, tm, jobManagers...)
		}),
		verify: restarted,
	},
	{
		name:   "tm-peer-partition",
		title:  "network: two TaskManagers cut off from each other only for 30 s",
		expect: "the data exchange between them breaks, the subtasks fail and restart from the last checkpoint until healing",
		hold:   30 * time.Second,
		inject: func(ctx context.Context, c *cluster, r *rand.Rand) (heal, string, error) {
			h, err := partition(ctx, c, faultedTMs[0], faultedTMs[1])
			return h, faultedTMs[0] + "/" + faultedTMs[1], err
		},
		verify: restarted,
	},
	{
		name:   "leader-storage-partition",
		title:  "network: the leader JobManager cut off from the checkpoint storage (S3) for 30 s",
		expect: "checkpoints wait (the leader's metadata writes retry) or fail; the jobs go on without a restart; checkpoints complete again after healing",
		hold:   30 * time.Second,
		inject: atLeader(func(ctx context.Context, c *cluster, l string) (heal, error) { return partition(ctx, c, l, "s3") }),
		verify: noRestart,
	},
	{
		name:   "storage-full",
		title:  "disk: the checkpoint storage's file system full for 30 s",
		expect: "checkpoints fail with an I/O error, nothing half-written is restored; checkpoints complete again once space returns",
		hold:   30 * time.Second,
		inject: func(ctx context.Context, c *cluster, r *rand.Rand) (heal, string, error) {
			h, n, err := fill(ctx, c, "s3", "/data/weir")
			return h, fmt.Sprintf("s3 (%d MiB written)", n>>20), err
		},
		verify: failedCheckpoints,
	},
	{
		name:   "tm-state-dir-full",
		title:  "disk: a TaskManager's state directory full for 30 s",
		expect: "its subtasks decline checkpoints or fail and restart from the last completed checkpoint; normal again once space returns",
		hold:   30 * time.Second,
		inject: func(ctx context.Context, c *cluster, r *rand.Rand) (heal, string, error) {
			tm := pick(r, faultedTMs)
			h, n, err := fill(ctx, c, tm, "/state")
			return h, fmt.Sprintf("%s (%d MiB written)", tm, n>>20), err
		},
	},
	{
		name:   "leader-paused",
		title:  "process: the leader JobManager stopped (SIGSTOP) for 15 s, three leases",
		expect: "the other JobManager takes over when the lease ends; the paused one steps down when it resumes (SIGCONT) and its writes are fenced",
		hold:   15 * time.Second,
		inject: atLeader(pause),
		verify: steppedDown,
	},
	{
		name:   "tm-paused",
		title:  "process: a TaskManager stopped (SIGSTOP) for 15 s, three heartbeat timeouts",
		expect: "it is lost at the heartbeat timeout and its subtasks fail over; when it resumes its stale attempts are cancelled and it registers again",
		hold:   15 * time.Second,
		inject: atTaskManager(pause),
		verify: restarted,
	},
	{
		name:   "tm-kill",
		title:  "process: a TaskManager killed (SIGKILL), back after 10 s",
		expect: "its subtasks fail over at once (the connection breaks); it registers again when it is back",
		hold:   10 * time.Second,
		inject: atTaskManager(kill),
		verify: restarted,
	},
	{
		name:   "leader-kill",
		title:  "process: the leader JobManager killed (SIGKILL), back after 10 s",
		expect: "the other JobManager takes over when the lease ends, recovers the jobs from etcd and adopts every subtask the TaskManagers run: none restarts",
		hold:   10 * time.Second,
		inject: atLeader(kill),
		verify: func(o *observation) error {
			if !o.leaderChanged() {
				return fmt.Errorf("leaders seen %v: the other JobManager never led", o.leaders)
			}
			if o.restarts != 0 || o.redeploys != 0 {
				return fmt.Errorf("%d job restarts and %d subtasks started again, want none", o.restarts, o.redeploys)
			}
			return nil
		},
	},
}

func faultByName(name string) (fault, bool) {
	for _, f := range faults {
		if f.name == name {
			return f, true
		}
	}
	return fault{}, false
}
