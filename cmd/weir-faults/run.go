package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"
)

// inflict injects f while the workload runs, holds it, heals it, and
// observes how the cluster came through: the monitor's counts over the
// fault, and how long after healing every job completed a checkpoint
// triggered after it.
func inflict(ctx context.Context, c *cluster, m *monitor, f fault, hold time.Duration, r *rand.Rand) (*observation, error) {
	leaderBefore := c.leader(ctx)
	before := m.snapshot()
	start := time.Now()
	h, target, err := f.inject(ctx, c, r)
	if err != nil {
		return nil, fmt.Errorf("inject %s: %w", f.name, err)
	}
	c.log.Info("fault injected", "fault", f.name, "target", target, "hold", hold)
	select {
	case <-ctx.Done():
	case <-time.After(hold):
	}
	healed := time.Now()
	// Healing must happen whatever ctx says: an interrupted run leaves no
	// partition or frozen process behind.
	if err := h(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("heal %s: %w", f.name, err)
	}
	c.log.Info("fault healed", "fault", f.name, "target", target)
	o := &observation{target: target}
	o.recovery, err = m.waitRecovered(ctx, healed, 3*time.Minute)
	if err != nil {
		return o, fmt.Errorf("after %s: %w", f.name, err)
	}
	// The cluster whole again: a TaskManager that was cut off or paused
	// registered again, a killed one is back.
	if err := c.waitReady(ctx, 2*time.Minute); err != nil {
		return o, fmt.Errorf("after %s: %w", f.name, err)
	}
	after := m.snapshot()
	o.leaders = m.leadersSince(before.leaders)
	o.restarts = after.restarts - before.restarts
	o.redeploys = after.redeploys - before.redeploys
	o.completed = after.completed - before.completed
	o.failed = after.failed - before.failed
	o.reasons = m.reasons()
	if leaderBefore != "" {
		o.stepDown = c.loggedSince(ctx, leaderBefore, start, "leadership lost; stepping down")
	}
	return o, nil
}

// rowResult is one row of the matrix as run.
type rowResult struct {
	fault        fault
	obs          *observation
	sum, windows verdict
	err          error // a failed expectation or a run that could not finish
	took         time.Duration
}

func (r rowResult) ok() bool { return r.err == nil && r.sum.ok() && r.windows.ok() }

// runRow runs one row on a fresh workload: both jobs running and
// checkpointing, the fault, its healing, the jobs to their end, the
// checkers.
func runRow(ctx context.Context, c *cluster, f fault, r *rand.Rand, rate int) (res rowResult) {
	start := time.Now()
	res.fault = f
	defer func() { res.took = time.Since(start) }()
	log := c.log.With("fault", f.name)
	w, err := startWorkload(ctx, c, f.name, int(f.hold/time.Second)+75, rate)
	if err != nil {
		res.err = err
		return res
	}
	m := newMonitor(c, w.jobs()...)
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	go m.run(mctx)
	if res.err = m.waitCheckpoints(ctx, 2, 2*time.Minute); res.err != nil {
		return res
	}
	res.obs, res.err = inflict(ctx, c, m, f, f.hold, r)
	if res.err == nil && f.verify != nil {
		if err := f.verify(res.obs); err != nil {
			res.err = fmt.Errorf("expectation: %w", err)
		}
	}
	if err := w.waitFinished(ctx, c, 10*time.Minute); err != nil {
		res.err = joinErr(res.err, err)
		for _, id := range w.jobs() {
			c.cancelJob(ctx, id)
		}
		return res
	}
	res.sum, res.windows = w.check(ctx, c)
	log.Info("row done", "ok", res.ok(), "sum", res.sum, "windows", res.windows, "err", res.err)
	return res
}

func joinErr(a, b error) error {
	if a == nil {
		return b
	}
	return fmt.Errorf("%w; %w", a, b)
}

// soakResult is what a soak run counted.
type soakResult struct {
	seed         uint64
	duration     time.Duration // the run, from the jobs' start to their check
	injected     map[string]int
	failures     []string // faults after which the cluster did not recover, with why
	recoveries   int
	maxRecovery  time.Duration
	maxFault     string
	totals       snapshot
	reasons      map[string]int
	sum, windows verdict
	sumCount     int64
	winCount     int64
}

func (s soakResult) ok() bool { return len(s.failures) == 0 && s.sum.ok() && s.windows.ok() }

// soak runs both jobs for about d while faults of every kind, chosen and
// timed by r, come and go; then the checkers.
func soak(ctx context.Context, c *cluster, d time.Duration, seed uint64, rate int, log *slog.Logger) (res soakResult) {
	r := newRand(seed)
	res = soakResult{seed: seed, injected: map[string]int{}}
	start := time.Now()
	defer func() { res.duration = time.Since(start) }()
	w, err := startWorkload(ctx, c, "soak", int(d/time.Second), rate)
	if err != nil {
		res.failures = append(res.failures, err.Error())
		return res
	}
	res.sumCount, res.winCount = w.sumCount, w.winCount
	m := newMonitor(c, w.jobs()...)
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	go m.run(mctx)
	if err := m.waitCheckpoints(ctx, 2, 2*time.Minute); err != nil {
		res.failures = append(res.failures, err.Error())
		return res
	}
	deadline := start.Add(d)
	cards := &deck{r: r}
	for time.Now().Before(deadline) && ctx.Err() == nil && !m.allFinished() {
		quiet := time.Duration(10+r.IntN(30)) * time.Second
		select {
		case <-ctx.Done():
		case <-time.After(quiet):
		}
		f := cards.deal()
		hold := time.Duration(10+r.IntN(21)) * time.Second
		res.injected[f.name]++
		o, err := inflict(ctx, c, m, f, hold, r)
		if err != nil {
			res.failures = append(res.failures, err.Error())
			log.Error("no recovery", "fault", f.name, "err", err)
			if err := c.waitReady(ctx, 5*time.Minute); err != nil {
				break
			}
			continue
		}
		res.recoveries++
		if o.recovery > res.maxRecovery {
			res.maxRecovery, res.maxFault = o.recovery, f.name
		}
		log.Info("recovered", "fault", f.name, "target", o.target, "hold", hold, "recovery", o.recovery.Round(time.Millisecond),
			"restarts", o.restarts, "failed_checkpoints", o.failed, "leaders", strings.Join(o.leaders, ">"))
	}
	if err := w.waitFinished(ctx, c, 20*time.Minute); err != nil {
		res.failures = append(res.failures, err.Error())
	}
	res.totals = m.snapshot()
	res.reasons = m.reasons()
	res.sum, res.windows = w.check(ctx, c)
	return res
}

// deck deals the faults in a random order, each once per round, so a
// soak long enough for one round has met every kind (independent draws
// left TaskManager kills out of a 30-minute run).
type deck struct {
	r    *rand.Rand
	left []fault
}

func (d *deck) deal() fault {
	if len(d.left) == 0 {
		d.left = append([]fault{}, faults...)
		d.r.Shuffle(len(d.left), func(i, j int) { d.left[i], d.left[j] = d.left[j], d.left[i] })
	}
	f := d.left[0]
	d.left = d.left[1:]
	return f
}

// newRand is the tool's source of choices: the same seed, the same faults
// at the same moments of the run.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
