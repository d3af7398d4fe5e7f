package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/window"
	"github.com/weirproject/weir/sdk"
)

// The workload of every row and of the soak: two jobs whose committed
// output has one right answer, so a checker finds every lost or
// duplicated record.
//   - sum: the running-sum job (sequence-source → keyed-sum → file-sink)
//     on Pebble with incremental checkpoints, so TaskManagers write
//     their state directories;
//   - windows: an event-time job (sequence-source with event time and
//     watermarks → tumbling window count → file-sink) on the heap backend.
const (
	sumSources, sumKeys = 3, 16
	winSources, winKeys = 2, 8
	// Event time: records 1 ms apart, up to 20 ms out of order, the
	// watermark 20 ms behind, so no record is late.
	etStepMs, etJitterMs = 1, 20
)

// windowConfig is the window job's window, in its spec and in the checker.
var windowConfig = map[string]any{"type": "tumbling", "size": "100ms", "aggregate": "count"}

type workload struct {
	name         string // output directory under /output/faults
	sum, windows string // job IDs
	sumCount     int64
	winCount     int64
}

// startWorkload submits both jobs, sized to run about seconds at rate
// records/s per source subtask.
func startWorkload(ctx context.Context, c *cluster, name string, seconds, rate int) (*workload, error) {
	w := &workload{name: name, sumCount: int64(sumSources * rate * seconds), winCount: int64(winSources * rate * seconds)}
	common := `checkpointing: {interval: 1s, mode: exactly-once, timeout: 1m, retained: 3}
restart-strategy: {type: fixed-delay, attempts: 100000, delay: 1s}
`
	sum := fmt.Sprintf(`name: faults-%s-sum
%sstate: {backend: pebble, incremental: true}
vertices:
  - {name: source, operator: sequence-source, parallelism: %d, config: {count: %d, keys: %d, rate: %d}}
  - {name: sum, operator: keyed-sum, parallelism: %d, inputs: [{from: source, partition: hash}]}
  - {name: sink, operator: file-sink, parallelism: %d, inputs: [{from: sum, partition: forward}], config: {path: %s}}
`, name, common, sumSources, w.sumCount, sumKeys, rate, sumSources, sumSources, w.out("sum"))
	windows := fmt.Sprintf(`name: faults-%s-windows
%svertices:
  - name: source
    operator: sequence-source
    parallelism: %d
    config: {count: %d, keys: %d, rate: %d, event-time: {step: %dms, jitter: %dms}}
    watermarks: {max-out-of-orderness: %dms, interval: 50ms}
  - {name: window, operator: window, parallelism: 2, inputs: [{from: source, partition: hash}], config: {type: %s, size: %s, aggregate: %s}}
  - {name: sink, operator: file-sink, parallelism: 2, inputs: [{from: window, partition: hash}], config: {path: %s}}
`, name, common, winSources, w.winCount, winKeys, rate, etStepMs, etJitterMs, etJitterMs,
		windowConfig["type"], windowConfig["size"], windowConfig["aggregate"], w.out("windows"))
	var err error
	if w.sum, err = c.submit(ctx, sum); err != nil {
		return nil, err
	}
	if w.windows, err = c.submit(ctx, windows); err != nil {
		c.cancelJob(ctx, w.sum)
		return nil, err
	}
	return w, nil
}

func (w *workload) out(job string) string { return "/output/faults/" + w.name + "/" + job }

func (w *workload) jobs() []string { return []string{w.sum, w.windows} }

// verdict is what the checkers found in one job's committed output.
type verdict struct {
	Records int    `json:"records"` // committed output lines
	Err     string `json:"error,omitempty"`
}

func (v verdict) ok() bool { return v.Err == "" }

// check copies both outputs out of the volume and runs the exactly-once
// checkers on them.
func (w *workload) check(ctx context.Context, c *cluster) (sum, windows verdict) {
	tmp, err := os.MkdirTemp("", "weir-faults-")
	if err != nil {
		return verdict{Err: err.Error()}, verdict{Err: err.Error()}
	}
	defer os.RemoveAll(tmp)
	read := func(job string) ([]string, error) {
		dir := filepath.Join(tmp, job)
		if err := c.copyOut(ctx, w.out(job), dir); err != nil {
			return nil, err
		}
		return check.ReadCommitted(dir)
	}
	lines, err := read("sum")
	if err == nil {
		sum.Records = len(lines)
		err = check.RunningSum(lines, w.sumCount, sumKeys)
	}
	if err != nil {
		sum.Err = err.Error()
	}
	lines, err = read("windows")
	if err == nil {
		windows.Records = len(lines)
		err = checkWindows(lines, w.winCount)
	}
	if err != nil {
		windows.Err = err.Error()
	}
	return sum, windows
}

func checkWindows(lines []string, count int64) error {
	spec, err := window.Parse(sdk.Config(windowConfig))
	if err != nil {
		return err
	}
	return check.Windows(lines, check.BatchWindows(spec, check.SequenceRecords(count, winKeys, etStepMs, etJitterMs)))
}

// waitFinished waits for both jobs to finish; a job that failed or was
// cancelled is an error at once.
func (w *workload) waitFinished(ctx context.Context, c *cluster, limit time.Duration) error {
	return waitFor(ctx, limit, "both jobs to finish", func() (bool, string) {
		var states []string
		done := true
		for _, id := range w.jobs() {
			j, err := c.job(ctx, id)
			if err != nil {
				return false, err.Error()
			}
			states = append(states, j.State)
			done = done && j.State == "FINISHED"
		}
		return done, strings.Join(states, ", ")
	})
}

// monitor polls the jobs and the leader every second for the whole row
// (or soak) and accumulates what a row reports: restarts, checkpoints
// completed and failed with their reasons, and when each job last
// completed a checkpoint triggered after a given moment.
type monitor struct {
	c    *cluster
	jobs []string

	mu      sync.Mutex
	stats   map[string]*jobStats
	leaders []string // each leader seen, in order, "" for none
}

type jobStats struct {
	state    string
	restarts int
	// attempts is each subtask's attempt and TaskManager as last seen;
	// redeploys counts the changes seen: subtasks started again.
	attempts  map[string]string
	redeploys int
	completed counter
	failed    counter
	reasons   map[int64]string // failed checkpoint → its failure message
	// completedTriggers are the trigger times of completed checkpoints
	// seen, with the time the monitor first saw each.
	completedTriggers map[int64]completedAt
}

type completedAt struct{ trigger, seen time.Time }

// counter sums a count that starts over when another JobManager leads:
// each drop starts a new segment.
type counter struct{ base, last int64 }

func (c *counter) observe(v int64) {
	if v < c.last {
		c.base += c.last
	}
	c.last = v
}

func (c counter) total() int64 { return c.base + c.last }

func newMonitor(c *cluster, jobs ...string) *monitor {
	m := &monitor{c: c, jobs: jobs, stats: map[string]*jobStats{}}
	for _, id := range jobs {
		m.stats[id] = &jobStats{reasons: map[int64]string{}, completedTriggers: map[int64]completedAt{}, attempts: map[string]string{}}
	}
	return m
}

// run polls until ctx ends.
func (m *monitor) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		m.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (m *monitor) poll(ctx context.Context) {
	leader := m.c.leader(ctx)
	m.mu.Lock()
	if n := len(m.leaders); n == 0 || m.leaders[n-1] != leader {
		m.leaders = append(m.leaders, leader)
	}
	m.mu.Unlock()
	for _, id := range m.jobs {
		j, jerr := m.c.job(ctx, id)
		cps, cerr := m.c.checkpoints(ctx, id)
		now := time.Now()
		m.mu.Lock()
		s := m.stats[id]
		if jerr == nil {
			s.state = j.State
			s.restarts = max(s.restarts, j.Restarts)
			for _, v := range j.Vertices {
				for i, st := range v.Subtasks {
					key, at := fmt.Sprintf("%s/%d", v.Name, i), fmt.Sprintf("#%d@%s", st.Attempt, st.TaskManagerID)
					if was, ok := s.attempts[key]; ok && was != at {
						s.redeploys++
					}
					s.attempts[key] = at
				}
			}
		}
		if cerr == nil {
			s.completed.observe(cps.Counts.Completed)
			s.failed.observe(cps.Counts.Failed)
			for _, h := range cps.History {
				switch h.Status {
				case "FAILED":
					if h.FailureMessage != nil {
						s.reasons[h.ID] = *h.FailureMessage
					}
				case "COMPLETED":
					if _, ok := s.completedTriggers[h.ID]; !ok {
						s.completedTriggers[h.ID] = completedAt{trigger: time.UnixMilli(h.TriggerTimestamp), seen: now}
					}
				}
			}
		}
		m.mu.Unlock()
	}
}

// snapshot is the monitor's totals at one moment.
type snapshot struct {
	restarts, redeploys, completed, failed int64
	leaders                                int
}

func (m *monitor) snapshot() snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s snapshot
	for _, st := range m.stats {
		s.restarts += int64(st.restarts)
		s.redeploys += int64(st.redeploys)
		s.completed += st.completed.total()
		s.failed += st.failed.total()
	}
	s.leaders = len(m.leaders)
	return s
}

// leadersSince are the leaders seen from the n-th change on.
func (m *monitor) leadersSince(n int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string{}, m.leaders[max(n-1, 0):]...)
}

// reasons are the distinct failure messages of failed checkpoints seen,
// each with how often.
func (m *monitor) reasons() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for _, st := range m.stats {
		for _, r := range st.reasons {
			out[shortReason(r)]++
		}
	}
	return out
}

// shortReason keeps a failure message's kind: the failure reason it
// names (IO_EXCEPTION, CHECKPOINT_DECLINED, ...), else its first clause.
func shortReason(r string) string {
	const prefix = "CHECKPOINT_FAILURE_REASON_"
	if i := strings.Index(r, prefix); i >= 0 {
		r = r[i+len(prefix):]
		if j := strings.IndexAny(r, ": "); j > 0 {
			r = r[:j]
		}
		return r
	}
	if i := strings.IndexAny(r, ":("); i > 0 {
		r = r[:i]
	}
	r = strings.TrimSpace(r)
	if len(r) > 60 {
		r = r[:60]
	}
	return r
}

// recoveredAt is when the monitor first saw, for job id, a completed
// checkpoint triggered at or after since; zero if not yet.
func (m *monitor) recoveredAt(id string, since time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	var first time.Time
	for _, c := range m.stats[id].completedTriggers {
		if !c.trigger.Before(since) && (first.IsZero() || c.seen.Before(first)) {
			first = c.seen
		}
	}
	return first
}

func (m *monitor) state(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats[id].state
}

// waitRecovered waits until every job completed a checkpoint triggered
// after since (or finished), and returns how long after since the last
// one did.
func (m *monitor) waitRecovered(ctx context.Context, since time.Time, limit time.Duration) (time.Duration, error) {
	var took time.Duration
	err := waitFor(ctx, limit, "a checkpoint of every job triggered after the healing", func() (bool, string) {
		took = 0
		var waiting []string
		for _, id := range m.jobs {
			at := m.recoveredAt(id, since)
			if at.IsZero() {
				if m.state(id) == "FINISHED" {
					continue
				}
				waiting = append(waiting, id+" "+m.state(id))
				continue
			}
			took = max(took, at.Sub(since))
		}
		return len(waiting) == 0, "waiting for " + strings.Join(waiting, ", ")
	})
	return took, err
}

// waitCheckpoints waits until every job completed n checkpoints.
func (m *monitor) waitCheckpoints(ctx context.Context, n int64, limit time.Duration) error {
	return waitFor(ctx, limit, fmt.Sprintf("%d completed checkpoints of every job", n), func() (bool, string) {
		m.mu.Lock()
		defer m.mu.Unlock()
		var counts []string
		done := true
		for _, id := range m.jobs {
			s := m.stats[id]
			counts = append(counts, fmt.Sprintf("%s %s %d", id, s.state, s.completed.total()))
			done = done && s.completed.total() >= n
		}
		return done, strings.Join(counts, ", ")
	})
}

func (m *monitor) allFinished() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.stats {
		if s.state != "FINISHED" {
			return false
		}
	}
	return true
}
