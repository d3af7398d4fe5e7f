package suite

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
	"github.com/weirproject/weir/bench/internal/stats"
	"github.com/weirproject/weir/internal/sql/compile"
	"github.com/weirproject/weir/internal/sql/nexmarksql"
	"github.com/weirproject/weir/nexmark/queries"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// N2 runs the Nexmark queries as SQL: each query of nexmarksql.Names and
// nexmarksql.UpdatingNames (RisingWave's query texts) as the script `weir
// sql -f script.sql -p 2` would run — the three nexmark sources bounded to
// N events (as fast as they go, nexmark.split.num = p) and CREATE SINK
// nexmark_qN AS the query into the blackhole sink (type = 'append-only',
// force_append_only = 'true', as RisingWave's benchmark: for the updating
// queries the sink keeps only the rows their changelog adds) — compiled
// here with internal/sql/compile (the CLI's compiler; it links libpg_query
// through cgo, so weir-bench is built with cgo) and submitted to a cluster
// of 1 JobManager + 1 stock TaskManager (bin/taskmanager) of 2 slots, on
// heap state. It measures each job exactly as N1 does (n1Measure: T =
// RUNNING → FINISHED, C = CPU of the JobManager and the TaskManager over
// T, events/s/core = N/C).
//
// Where the Go API has the same query (nexmark/queries: q0 q1 q2 q3 q4 q5
// q7 q8; its q4 is Beam's, over sliding windows, where the SQL's is an
// unbounded updating aggregate), its job runs in the same benchmark on a
// cluster of its own that is the query's program, as in N1 (n1TaskManager,
// n1Run on heap), up at the same time as the SQL cluster: the two sides'
// samples alternate (Go, SQL, SQL, Go, Go, SQL, …), so that what else
// loads the machine loads both alike, and SQL / Go API is the ratio of
// their medians. Each point is the median of NexmarkSamples samples.
//
// With -profile, for each query whose SQL runs at less than 0.8 × its Go
// twin, one more (unmeasured) job of each side runs while its TaskManager
// is profiled (the stock TaskManager with --pprof, the program with
// --pprof); for each other query whose SQL misses 5 × Flink 1.13 per core,
// one more SQL job.

const (
	// n2DefaultEvents is N unless -nexmark-events says otherwise; -quick
	// takes n2QuickEvents.
	n2DefaultEvents  = 3_000_000
	n2QuickEvents    = 500_000
	n2DefaultSamples = 3
	// n2GoalGo is the goal on SQL / Go API, n2GoalFlink the goal on SQL
	// against Flink 1.13's published events/s/core.
	n2GoalGo    = 0.8
	n2GoalFlink = 5
)

// N2 runs only when asked for (BENCH=N2 or BENCH=nexmark-sql).
func init() { onDemand["N2"] = true }

// n2FlinkMore is Flink 1.13's published events/s/core (the nexmark/nexmark
// README's table, "Throughput/Cores", as n1Flink) of the queries N1 does
// not run.
var n2FlinkMore = map[string]float64{
	"q9": 14.24e3, "q10": 57.81e3, "q11": 39.7e3, "q12": 75.67e3, "q14": 161.23e3,
	"q15": 72.42e3, "q16": 18.65e3, "q17": 116.8e3, "q18": 53.7e3, "q19": 44.04e3,
	"q20": 18.98e3, "q21": 98.49e3, "q22": 129.96e3,
}

// n2NoPeers says why a query has no published number to compare with.
var n2NoPeers = map[string]string{
	"q6": "q6 has no published peer number: Flink's suite does not run it (its OVER aggregate takes no retractions), and RisingWave's report has no q6",
}

// n2Names are the queries N2 runs by default: nexmarksql.Names and
// nexmarksql.UpdatingNames, in the order of the Nexmark suite.
func n2Names() []string {
	names := slices.Concat(nexmarksql.Names, nexmarksql.UpdatingNames)
	slices.SortStableFunc(names, func(a, b string) int { return n2Number(a) - n2Number(b) })
	return names
}

// n2Number is the number of query qN.
func n2Number(q string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(q, "q"))
	if err != nil {
		return math.MaxInt
	}
	return n
}

// n2Updating reports whether query q's result updates (its blackhole sink
// keeps only the rows added).
func n2Updating(q string) bool { return slices.Contains(nexmarksql.UpdatingNames, q) }

// n2Flink is Flink 1.13's published events/s/core of query q.
func n2Flink(q string) float64 {
	if v, ok := n1Flink[q]; ok {
		return v
	}
	return n2FlinkMore[q]
}

// n2RisingWave is RisingWave's per-core numbers from the
// nexmark-risingwave-1.0 report (github.com/risingwavelabs/nexmark-risingwave-1.0,
// new-performance-report-preview.pdf, 8 vCPU: its RisingWave table's
// Throughput(kr/s) ÷ CPU(compute+compactor, %) / 100, to 3 significant
// digits): q0–q8 as bench/BENCHMARKS.md's N1 table has them, and the
// updating queries q9 q15 q16 q17 q18 q19 (q4 is N1's). RisingWave's of
// q10 q11 q12 q14 q20 q21 q22 are not included.
var n2RisingWave = map[string]float64{
	"q0": 170e3, "q1": 168e3, "q2": 172e3, "q3": 136e3, "q4": 25.0e3, "q5": 11.3e3, "q7": 37.5e3, "q8": 84.3e3,
	"q9": 21.2e3, "q15": 130e3, "q16": 11.9e3, "q17": 42.7e3, "q18": 25.8e3, "q19": 16.8e3,
}

// n2Twin reports whether the Go API has query q.
func n2Twin(q string) bool { return slices.Contains(queries.Names, q) }

// n2Script is query q's script: N events, p splits, the blackhole sink.
//
// A query whose results update runs with mini-batch aggregation, as the
// Nexmark suite's Flink configuration does (table.exec.mini-batch.*:
// enabled, 2 s, 50,000): its SET statements come first.
func n2Script(q string, events int64) string {
	s := nexmarksql.Script(q, nexmarksql.ScriptOptions{Events: events, Splits: n1Parallelism})
	if slices.Contains(nexmarksql.UpdatingNames, q) {
		s = n2MiniBatch + s
	}
	return s
}

// n2MiniBatch is the Nexmark suite's Flink mini-batch settings.
const n2MiniBatch = `SET 'table.exec.mini-batch.enabled' = 'true';
SET 'table.exec.mini-batch.allow-latency' = '2s';
SET 'table.exec.mini-batch.size' = '50000';
`

// n2Graph compiles query q's script into its one job graph: every vertex
// at p=2, checkpoints every 10 s (N1's), heap state.
func n2Graph(q string, events int64) (*weirv1.JobGraph, error) {
	res, err := compile.Script(n2Script(q, events), compile.Options{Parallelism: n1Parallelism, CheckpointInterval: n1Checkpoint})
	if err != nil {
		return nil, fmt.Errorf("%s: compile: %w", q, err)
	}
	if len(res.Jobs) != 1 {
		return nil, fmt.Errorf("%s: the script compiled into %d jobs, want 1", q, len(res.Jobs))
	}
	j := res.Jobs[0]
	if j.Graph == nil || j.Select != nil || j.ExplainOnly {
		return nil, fmt.Errorf("%s: job %s is not a sink's job", q, j.Name)
	}
	g := j.Graph
	switch b := g.GetState().GetBackend(); b {
	case weirv1.StateBackendConfig_BACKEND_UNSPECIFIED, weirv1.StateBackendConfig_BACKEND_HEAP:
	default:
		return nil, fmt.Errorf("%s: the compiled job's state backend is %v, want heap", q, b)
	}
	g.State = &weirv1.StateBackendConfig{Backend: weirv1.StateBackendConfig_BACKEND_HEAP}
	return g, nil
}

// n2StockTaskManager writes, into dir, the executable the SQL cluster's
// TaskManager is started as: a shell script that execs the stock
// TaskManager with a local state directory of its own under dir (the Go
// API's cluster, up at the same time, has a TaskManager of the same ID,
// whose default directory is cleared at start), and --pprof when
// profiling (pprof on its HTTP address).
func n2StockTaskManager(dir, prog string, pprof bool) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	extra := ""
	if pprof {
		extra = " --pprof"
	}
	path := filepath.Join(dir, "sql-taskmanager")
	script := fmt.Sprintf("#!/bin/sh\nexec '%s' --state-dir '%s'/state-$$%s \"$@\"\n", prog, dir, extra)
	return path, os.WriteFile(path, []byte(script), 0o755)
}

// n2Cluster is one side's cluster, started on first use and again when its
// TaskManager died.
type n2Cluster struct {
	e      *Env
	name   string
	dir    string
	bin    harness.Binaries
	pprof  bool
	c      *harness.Cluster
	starts int
}

func (s *n2Cluster) get() (*harness.Cluster, error) {
	if s.c != nil && len(s.c.LiveTMs()) > 0 {
		return s.c, nil
	}
	s.stop()
	dir := s.dir
	if s.starts > 0 {
		// A cluster started again keeps its logs apart from the first's.
		dir = filepath.Join(s.dir, fmt.Sprintf("restart-%d", s.starts))
	}
	s.starts++
	s.e.Logf("starting cluster %s (1 TaskManager × %d slots, %s)", s.name, n1Parallelism, s.bin.TaskManager)
	c, err := harness.StartCluster(s.e.Ctx, harness.Config{Dir: dir, Bin: s.bin, TaskManagers: 1, Slots: n1Parallelism})
	if err != nil {
		return nil, err
	}
	if s.pprof {
		for _, t := range c.TMs {
			t.Pprof = t.HTTP
		}
	}
	s.c = c
	return c, nil
}

func (s *n2Cluster) stop() {
	if s.c != nil {
		s.e.StopCluster(s.c)
		s.c = nil
	}
}

// n2Samples are one side's measured runs of one query.
type n2Samples struct {
	perCore, perS, cores, wall []float64
	completed                  []float64 // checkpoints
	// paired holds, by sample index, the run's events/s/core (NaN: no
	// result), for the SQL / Go ratios of runs next to each other.
	paired []float64
}

func (s *n2Samples) add(r n1Result, events int64) {
	perS, cores, perCore, _ := r.metrics(events)
	s.perCore = append(s.perCore, perCore)
	s.perS = append(s.perS, perS)
	s.cores = append(s.cores, cores)
	s.wall = append(s.wall, r.Wall.Seconds())
	s.completed = append(s.completed, float64(r.Completed))
	s.paired = append(s.paired, perCore)
}

// n2Median is the median of v, NaN for none.
func n2Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return stats.Summarize(v, true).Median
}

// n2Order is which side runs first in sample i: the Go API in even
// samples, SQL in odd ones (Go, SQL, SQL, Go, Go, SQL, …).
func n2Order(i int) []string {
	if i%2 == 0 {
		return []string{"go", "sql"}
	}
	return []string{"sql", "go"}
}

// N2: the Nexmark queries as SQL, events/s per core, against the Go API.
func runN2(e *Env, b *Bench) error {
	prog := filepath.Join(filepath.Dir(e.Bin.TaskManager), "nexmark")
	if _, err := os.Stat(prog); err != nil {
		return fmt.Errorf("%w (build it: make bench, or go build -o bin/ ./examples/nexmark)", err)
	}
	if _, err := os.Stat(e.Bin.StockTaskManager); err != nil {
		return fmt.Errorf("%w (build it: make bench, or go build -o bin/ ./cmd/taskmanager)", err)
	}
	events := e.NexmarkEvents
	if events <= 0 {
		events = n2DefaultEvents
		if e.Quick {
			events = n2QuickEvents
		}
	}
	samples := e.NexmarkSamples
	if samples <= 0 {
		samples = n2DefaultSamples
		if e.Quick {
			samples = 1
		}
	}
	names := n2Names()
	if len(e.NexmarkQueries) > 0 {
		all := names
		names = nil
		for _, q := range e.NexmarkQueries {
			if !slices.Contains(all, q) {
				return fmt.Errorf("-nexmark-queries: no SQL query %q (have %v)", q, all)
			}
			if slices.Contains(names, q) {
				return fmt.Errorf("-nexmark-queries: %s given twice", q)
			}
			names = append(names, q)
		}
	}
	n := float64(events)

	type result struct{ sql, goapi n2Samples }
	res := map[string]*result{}
	var runErr error
	for _, q := range names {
		if runErr = e.Ctx.Err(); runErr != nil {
			break
		}
		r := &result{}
		res[q] = r
		if err := n2Query(e, b, prog, q, events, samples, &r.sql, &r.goapi); err != nil {
			runErr = fmt.Errorf("%s: %w", q, err)
			break
		}
	}

	var below []string
	for _, q := range names {
		r := res[q]
		if r == nil || len(r.sql.perCore) == 0 {
			b.Note("%s: no SQL result (no job finished: see the problems)", q)
			continue
		}
		flink := n2Flink(q)
		sqlMed := n2Median(r.sql.perCore)
		p := b.Add(q+" SQL: events/s/core", "events/s/core", true, r.sql.perCore)
		twin := n2Twin(q) && len(r.goapi.perCore) > 0
		if twin {
			goMed := n2Median(r.goapi.perCore)
			p.Against("Go API "+q+" (same run)", goMed, "events/s/core")
			var pr []float64
			for i := range min(len(r.sql.paired), len(r.goapi.paired)) {
				if s, g := r.sql.paired[i], r.goapi.paired[i]; !math.IsNaN(s) && !math.IsNaN(g) && g > 0 {
					pr = append(pr, s/g)
				}
			}
			if len(pr) > 0 {
				p.With("sql_go_ratio_paired_median", n2Median(pr))
			}
			if sqlMed < n2GoalGo*goMed {
				below = append(below, q)
			}
		} else if flink > 0 {
			p.Against("Flink 1.13 (published)", flink, "events/s/core")
		}
		if flink > 0 {
			p.With("flink_ratio", sqlMed/flink)
		}
		p.With("events", n).
			With("events_per_s", n2Median(r.sql.perS)).With("cpu_cores", n2Median(r.sql.cores)).
			With("wall_s", n2Median(r.sql.wall)).With("cores_x_time_s", n/sqlMed).With("checkpoints_completed", n2Median(r.sql.completed))
		if rw, ok := n2RisingWave[q]; ok {
			p.With("risingwave_ratio", sqlMed/rw)
		}
		if twin {
			goMed := n2Median(r.goapi.perCore)
			g := b.Add(q+" Go API: events/s/core", "events/s/core", true, r.goapi.perCore).
				Against("Flink 1.13 (published)", flink, "events/s/core").
				With("events", n).With("events_per_s", n2Median(r.goapi.perS)).With("cpu_cores", n2Median(r.goapi.cores)).
				With("wall_s", n2Median(r.goapi.wall)).With("cores_x_time_s", n/goMed).With("checkpoints_completed", n2Median(r.goapi.completed))
			if rw, ok := n2RisingWave[q]; ok {
				g.With("risingwave_ratio", goMed/rw)
			}
		}
		peers := fmt.Sprintf("; %.2f × Flink 1.13%s", sqlMed/flink, rwText(q, sqlMed))
		if why, ok := n2NoPeers[q]; ok {
			peers = " (" + why + ")"
		}
		b.Note("%s SQL: %d of %d runs FINISHED, median %.2f s, %.2f cores, %s events/s%s", q, len(r.sql.perCore), samples,
			n2Median(r.sql.wall), n2Median(r.sql.cores), fmtNum(n2Median(r.sql.perS), ""), peers)
		if n2Twin(q) {
			if twin {
				b.Note("%s Go API: %d of %d runs FINISHED, median %.2f s, %.2f cores, %s events/s; %.2f × Flink 1.13%s", q, len(r.goapi.perCore), samples,
					n2Median(r.goapi.wall), n2Median(r.goapi.cores), fmtNum(n2Median(r.goapi.perS), ""), n2Median(r.goapi.perCore)/flink, rwText(q, n2Median(r.goapi.perCore)))
			} else {
				b.Note("%s Go API: no result (no job finished: see the problems)", q)
			}
		}
	}
	for _, q := range names {
		r := res[q]
		if r == nil || !n2Twin(q) {
			continue
		}
		v := math.NaN()
		if len(r.sql.perCore) > 0 && len(r.goapi.perCore) > 0 {
			v = n2Median(r.sql.perCore) / n2Median(r.goapi.perCore)
		}
		b.Goal(fmt.Sprintf("%s SQL / Go API events/s/core", q), v, ">=", n2GoalGo, "×")
	}
	for _, q := range names {
		v := math.NaN()
		if r := res[q]; r != nil && len(r.sql.perCore) > 0 {
			v = n2Median(r.sql.perCore)
		}
		f := n2Flink(q)
		if f <= 0 {
			continue // no peer to measure against (n2NoPeers)
		}
		b.Goal(fmt.Sprintf("%s SQL events/s/core (%d × Flink 1.13's %s)", q, n2GoalFlink, fmtNum(f, "")), v, ">=", n2GoalFlink*f, "events/s/core")
	}
	b.Note("method: each query of internal/sql/nexmarksql (RisingWave's texts) as a script of the three nexmark sources (nexmark.event.num = %s, nexmark.split.num = %d, no pacing) and CREATE SINK … WITH (connector = 'blackhole', type = 'append-only', force_append_only = 'true'; for the updating queries, %s, the sink keeps only the rows added, as RisingWave's benchmark), compiled by internal/sql/compile (parallelism %d, checkpoints every %s, exactly-once aligned) into one job on heap state, on 1 JobManager + 1 stock TaskManager (bin/taskmanager) of %d slots; the Go API's twin (nexmark/queries, %s; its q4 is Beam's, the mean winning price per category over 10 s windows sliding by 5 s, where the SQL's is an unbounded updating AVG) as in N1 (heap) on a cluster of its own, up at the same time, the two sides' runs alternating; T = RUNNING → FINISHED, C = CPU (/proc) of the JobManager and the TaskManager over T; events/s/core = N/C, each point the median of %d runs; SQL / Go API is the ratio of the medians (sql_go_ratio_paired_median: the median of the ratios of runs next to each other)",
		fmtNum(n, ""), n1Parallelism, strings.Join(nexmarksql.UpdatingNames, " "), n1Parallelism, n1Checkpoint, n1Parallelism, strings.Join(queries.Names, " "), samples)
	var rw, noRW []string
	for _, q := range n2Names() {
		if _, ok := n2RisingWave[q]; ok {
			rw = append(rw, q)
		} else {
			noRW = append(noRW, q)
		}
	}
	b.Note("Flink 1.13: the nexmark/nexmark README's Throughput/Cores (3 machines × 8 cores, 100 M events); RisingWave: the nexmark-risingwave-1.0 report (8 vCPU, Throughput ÷ CPU of compute + compactor; q0–q8 as bench/BENCHMARKS.md's N1 table) for %s — RisingWave's per-core numbers of %s are not included. Flink's q10 writes to a partitioned file system (ours: blackhole), its q11 is a group-window SESSION (ours: the SESSION table function), its q14 has the count_char UDF column (ours: without it, as RisingWave's text)", strings.Join(rw, " "), strings.Join(noRW, " "))
	if len(below) > 0 {
		b.Note("SQL below %.1f × its Go API twin: %s%s", n2GoalGo, strings.Join(below, " "), map[bool]string{false: " (run with -profile to profile them)", true: ""}[e.Profile])
	}
	return runErr
}

// rwText is ", N × RisingWave" where n2RisingWave has RisingWave's number
// of q.
func rwText(q string, perCore float64) string {
	if rw, ok := n2RisingWave[q]; ok {
		return fmt.Sprintf(", %.2f × RisingWave", perCore/rw)
	}
	return ""
}

// n2Query measures query q: samples SQL runs and, when the Go API has q,
// samples Go API runs, alternating, each side on a cluster of its own.
func n2Query(e *Env, b *Bench, prog, q string, events int64, samples int, sqlS, goS *n2Samples) error {
	g, err := n2Graph(q, events)
	if err != nil {
		return err
	}
	dir := filepath.Join(e.Work, "n2-"+q)
	tm, err := n2StockTaskManager(filepath.Join(dir, "sql"), e.Bin.StockTaskManager, e.Profile)
	if err != nil {
		return err
	}
	sqlBin := e.Bin
	sqlBin.TaskManager = tm
	sides := map[string]*n2Cluster{"sql": {e: e, name: "n2-" + q + "-sql", dir: filepath.Join(dir, "sql"), bin: sqlBin, pprof: e.Profile}}
	defer sides["sql"].stop()
	twin := n2Twin(q)
	if twin {
		gtm, err := n1TaskManager(filepath.Join(dir, "go"), prog, q, e.Profile)
		if err != nil {
			return err
		}
		goBin := e.Bin
		goBin.TaskManager = gtm
		sides["go"] = &n2Cluster{e: e, name: "n2-" + q + "-go", dir: filepath.Join(dir, "go"), bin: goBin, pprof: e.Profile}
		defer sides["go"].stop()
	}
	// Both clusters up before the first run, so neither's start-up lands
	// in the other's measurement.
	for _, side := range []string{"sql", "go"} {
		if s := sides[side]; s != nil {
			if _, err := s.get(); err != nil {
				return fmt.Errorf("%s cluster: %w", side, err)
			}
		}
	}
	var sqlWall, goWall time.Duration
	for i := range samples {
		for _, side := range n2Order(i) {
			s := sides[side]
			if s == nil {
				continue
			}
			c, err := s.get()
			if err != nil {
				return fmt.Errorf("%s cluster: %w", side, err)
			}
			label := fmt.Sprintf("N2 %s %s %d/%d", q, side, i+1, samples)
			if e.Ctx.Err() != nil {
				return e.Ctx.Err()
			}
			e.Logf("%s: %d events", label, events)
			var r n1Result
			if side == "sql" {
				r, err = n1Measure(e, c, label, events, func() (string, error) {
					resp, err := c.Client.SubmitJob(e.Ctx, &weirv1.SubmitJobRequest{Job: g})
					if err != nil {
						return "", err
					}
					return resp.GetJobId(), nil
				})
			} else {
				r, err = n1Run(e, c, q, "heap", events)
			}
			out := sqlS
			if side == "go" {
				out = goS
			}
			if err != nil {
				if e.Ctx.Err() != nil {
					return err
				}
				e.Problem("%s: %v\nTaskManager log:\n%s", label, err, n1Tail(c))
				out.paired = append(out.paired, math.NaN())
				continue
			}
			perS, cores, perCore, _ := r.metrics(events)
			e.Logf("%s: %s in %.2f s: %s events/s, %.2f cores, %s events/s/core, %d checkpoints", label, r.State, r.Wall.Seconds(), fmtNum(perS, ""), cores, fmtNum(perCore, ""), r.Completed)
			if r.State != weirv1.JobState_JOB_STATE_FINISHED {
				e.Problem("%s: job %s: %s\nTaskManager log:\n%s", label, r.State, r.Cause, n1Tail(c))
				out.paired = append(out.paired, math.NaN())
				continue
			}
			if r.Restarts > 0 {
				e.Problem("%s: job FINISHED after %d restarts (numbers include the recovery)", label, r.Restarts)
			}
			if n := r.FailedCkpt - r.FailedAtEnd; n > 0 {
				e.Problem("%s: %d checkpoints failed while the job ran (and %d as it ended)", label, n, r.FailedAtEnd)
			}
			out.add(r, events)
			if side == "sql" {
				sqlWall = r.Wall
			} else {
				goWall = r.Wall
			}
		}
	}
	if !e.Profile || len(sqlS.perCore) == 0 {
		return nil
	}
	sqlMed := n2Median(sqlS.perCore)
	belowGo := twin && len(goS.perCore) > 0 && sqlMed < n2GoalGo*n2Median(goS.perCore)
	_, noPeers := n2NoPeers[q]
	if belowGo || noPeers || sqlMed < n2GoalFlink*n2Flink(q) {
		n2Profile(e, b, sides["sql"], q, "sql", sqlWall, func(c *harness.Cluster) (string, error) {
			resp, err := c.Client.SubmitJob(e.Ctx, &weirv1.SubmitJobRequest{Job: g})
			if err != nil {
				return "", err
			}
			return resp.GetJobId(), nil
		}, events)
	}
	if belowGo {
		n2Profile(e, b, sides["go"], q, "go", goWall, func(c *harness.Cluster) (string, error) {
			return n1Submit(e, c, q, "heap", events)
		}, events)
	}
	return nil
}

// n2Profile runs one more job on side's cluster, unmeasured, and profiles
// the TaskManager over most of it (as long as the last measured run took,
// 1 to 10 s).
func n2Profile(e *Env, b *Bench, s *n2Cluster, q, side string, wall time.Duration, submit func(*harness.Cluster) (string, error), events int64) {
	c, err := s.get()
	if err != nil {
		e.Logf("N2 %s %s profile run: %v", q, side, err)
		return
	}
	job, err := submit(c)
	if err == nil {
		err = c.WaitRunning(e.Ctx, job, time.Minute)
	}
	if err != nil {
		e.Logf("N2 %s %s profile run: %v", q, side, err)
		return
	}
	d := min(max(wall*4/5, time.Second), 10*time.Second)
	if wall == 0 {
		d = 5 * time.Second
	}
	e.Logf("N2 %s: profiling the %s TaskManager for %s of an extra job", q, side, d.Round(time.Second))
	profileTMs(e, b, c, q+"-"+side, d)
	if _, err := n1Wait(e, c, job, n1JobTimeout(events)); err != nil {
		e.Logf("N2 %s %s profile run: %v", q, side, err)
	}
}
