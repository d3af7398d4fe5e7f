package suite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
)

// Spec is one benchmark of the suite.
type Spec struct {
	ID    string
	Name  string
	Title string
	Run   func(e *Env, b *Bench) error
}

// All is the suite in the order; the floors come first because
// every other benchmark divides by them.
var All = []Spec{
	{"F", "floors", "physical floors of this machine (two processes on loopback unless noted)", runFloors},
	{"B1", "checkpoint-overhead", "throughput with periodic checkpoints vs none: running-sum (source → hash → keyed-sum → file-sink), p=2 on 2 TaskManagers", runB1},
	{"B2", "checkpoint-latency", "checkpoint latency trigger → completed, idle pipeline, ~1 KiB state per subtask; closed-loop checkpoints/s", runB2},
	{"B3", "backpressure", "checkpoint duration under back-pressure (sink spinning 200 µs/record): aligned, unaligned, aligned with timeout", runB3},
	{"B4", "barrier-latency", "barrier latency per hop, in-process (forward, chained and unchained) and across TaskManagers (rebalance), idle and 50% loaded", runB4},
	{"L1", "latency", "end-to-end latency, source → map → sink across 2 TaskManagers, at-least-once and exactly-once, at 10 %, 50 % and 80 % of capacity: p50 / p99 / p99.9 against the bare hops", runL1},
	{"B5", "throughput", "records/s per core (CPU time of all processes), 2 TaskManagers, checkpoints every 1 s", runB5},
	{"W1", "windows", "window operator records/s per core (tumbling, sliding, session; heap and Pebble) against keyed-sum on the same backend, 2 TaskManagers, checkpoints every 1 s", runW1},
	{"G1", "goapi", "typed Go API (package weir) records/s per core against the same job from built-in operators, 2 TaskManagers, checkpoints every 1 s", runG1},
	{"K1", "kafka", "Kafka source → map → Kafka sink, exactly-once, records/s per core against franz-go consume + transactional produce, 2 TaskManagers, checkpoints every 1 s, one kafka-dev broker", runK1},
	{"B6", "recovery", "recovery after SIGKILL of a TaskManager, 1 s checkpoints, ~100 MB heap state", runB6},
	{"B6R", "region-recovery", "B6 with region failover: two independent subtask chains, only the killed TaskManager's region restarts", runB6R},
	{"B7", "ha-cost", "coordinator and HA cost with etcd: etcd operations and JobManager CPU per checkpoint, max checkpoint rate", runB7},
	{"X", "footprint", "idle RSS of the daemons and start-up time from process start to a job RUNNING", runFootprint},
	{"S1", "state", "Pebble state backend in-process (backend + local storage, no RPC): checkpoint sync/async duration and bytes written, incremental vs full, 1 GiB keyed state, 1% of keys changing per interval (on demand: BENCH=S1)", runS1},
	{"S3", "s3-checkpoints", "checkpoints of 1 GiB of Pebble state (full and incremental) to S3 (versitygw on loopback) vs the local disk, against minio-go PutObject to the same server; TaskManager peak RSS (on demand: BENCH=S3)", runS3},
	{"R1", "local-recovery", "restore after a task failure of 1 GiB of Pebble state checkpointed to S3 (versitygw on loopback), TaskManagers without --local-recovery (download from S3) vs with it (local copy), same TaskManagers; TaskManager peak RSS (on demand: BENCH=R1)", runR1},
	{"RS", "rescale", "rescaling 2 ↔ 4 stateful subtasks with 1 GiB of Pebble state checkpointed to S3 (versitygw on loopback), 2 TaskManagers × 2 slots with local recovery: request → all subtasks running restored, bytes downloaded against the state that changed subtask, beside stop-with-savepoint-and-resume of the same job (on demand: BENCH=RS)", runRS},
	{"H1", "leader-failover", "a change of JobManager leader (SIGKILL, etcd HA, 2 s lease) under a running keyed job: kill → new leader, → its first checkpoint, the longest pause of the sink's input, subtasks restarted (on demand: BENCH=H1)", runH1},
	{"N1", "nexmark", "Nexmark q0 q1 q2 q3 q4 q5 q7 q8 (Go API, examples/nexmark) on heap and incremental Pebble state: N events as fast as they go, p=2, checkpoints every 10 s, 1 TaskManager × 2 slots; events/s, cores, events/s/core, Cores × Time (on demand: BENCH=N1)", runN1},
	{"N2", "nexmark-sql", "Nexmark q0–q5 q7–q12 q14–q22 as SQL (internal/sql/nexmarksql, RisingWave's texts, the updating q4 q9 q15–q19 included, compiled by internal/sql/compile) on stock TaskManagers, heap state, measured as N1 and run by turns with the Go API's twin where it has one (q0 q1 q2 q3 q4 q5 q7 q8); events/s/core, SQL / Go API, × Flink (on demand: BENCH=N2)", runN2},
}

// Env is what benchmarks share.
type Env struct {
	Ctx     context.Context
	Bin     harness.Binaries
	Self    string // this executable, for the floor and etcd helper processes
	Work    string
	Results string // where profiles go
	Quick   bool
	Profile bool
	// StateBytes sizes S1's, S3's and R1's keyed state; 0 for their default.
	StateBytes int64
	// NexmarkEvents is how many events each of N1's and N2's jobs
	// generates; 0 for their defaults.
	NexmarkEvents int64
	// NexmarkSamples is how many times N2 measures each query on each
	// side (SQL, Go API); 0 for its default (3; -quick: 1).
	NexmarkSamples int
	// NexmarkQueries restricts N2 to these queries (of nexmarksql.Names
	// and nexmarksql.UpdatingNames); empty for all.
	NexmarkQueries []string
	// QuietWait bounds how long, in the whole run, to wait before
	// benchmarks for the rest of the host to use less than QuietCores of
	// CPU.
	QuietWait  time.Duration
	QuietCores float64
	Floors     *Floors
	report     *Report
	bench      *Bench

	etcdOnce sync.Once
	etcd     *harness.Proc
	etcdAddr string
	etcdErr  error

	certsOnce sync.Once
	certsDir  string
	certsErr  error
}

// Logf prints progress to stderr.
func (e *Env) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// Problem records a system problem noticed during the current benchmark.
func (e *Env) Problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	id := ""
	if e.bench != nil {
		id = e.bench.ID + ": "
	}
	e.report.Problems = append(e.report.Problems, id+msg)
	e.Logf("PROBLEM: %s", firstLine(msg))
}

// Cluster starts a cluster in a fresh directory.
func (e *Env) Cluster(name string, cfg harness.Config) (*harness.Cluster, error) {
	cfg.Dir = filepath.Join(e.Work, name)
	cfg.Bin = e.Bin
	cfg.Pprof = cfg.Pprof || e.Profile
	tls := ""
	if cfg.TLS != "" {
		tls = ", mutual TLS"
	}
	e.Logf("starting cluster %s (%d TaskManagers × %d slots%s)", name, cfg.TaskManagers, cfg.Slots, tls)
	return harness.StartCluster(e.Ctx, cfg)
}

// StopCluster stops a cluster, recording an unclean shutdown as a problem.
func (e *Env) StopCluster(c *harness.Cluster) {
	if c == nil {
		return
	}
	if err := c.Stop(); err != nil {
		e.Problem("cluster shutdown: %v", err)
	}
}

// Etcd starts (once) a single-member etcd in its own process.
func (e *Env) Etcd() (string, error) {
	e.etcdOnce.Do(func() {
		dir := filepath.Join(e.Work, "etcd")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			e.etcdErr = err
			return
		}
		e.etcdAddr = harness.FreeAddr()
		p, err := harness.Start("etcd", e.Self, harness.LogPath(e.Work, "etcd"), nil, "serve-etcd", "--dir", filepath.Join(dir, "data"), "--addr", e.etcdAddr)
		if err != nil {
			e.etcdErr = err
			return
		}
		e.etcd = p
		e.etcdErr = harness.Poll(e.Ctx, 30*time.Second, 20*time.Millisecond, "etcd ready", func() (bool, error) {
			if p.Exited() {
				return false, fmt.Errorf("etcd exited: %s", p.Tail(2000))
			}
			b, _ := os.ReadFile(p.Log)
			return strings.Contains(string(b), "etcd ready"), nil
		})
	})
	return e.etcdAddr, e.etcdErr
}

// Close stops the helper processes.
func (e *Env) Close() {
	if e.etcd != nil {
		if err := e.etcd.Stop(10 * time.Second); err != nil {
			e.Logf("etcd shutdown: %v", err)
		}
	}
}

// Run runs the selected benchmarks (all when only is empty; the floors
// always) and fills the report.
func Run(e *Env, r *Report, only []string) {
	e.report = r
	want := func(s Spec) bool {
		if s.ID == "F" {
			return true
		}
		if len(only) == 0 {
			return !onDemand[s.ID]
		}
		for _, o := range only {
			if strings.EqualFold(o, s.ID) || strings.EqualFold(o, s.Name) {
				return true
			}
		}
		return false
	}
	for _, s := range All {
		if !want(s) {
			continue
		}
		if e.Ctx.Err() != nil {
			break
		}
		b := &Bench{ID: s.ID, Title: s.Title, Status: "ok"}
		e.bench = b
		r.Benchmarks = append(r.Benchmarks, b)
		waited := e.waitQuiet()
		e.Logf("=== %s %s: %s", s.ID, s.Name, s.Title)
		start := time.Now()
		b.Host = &HostLoad{LoadAvgStart: harness.LoadAvg(), QuietWaitS: waited.Seconds()}
		in := harness.StartInterference(500 * time.Millisecond)
		func() {
			defer func() {
				if p := recover(); p != nil {
					b.Status, b.Error = "error", fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
				}
			}()
			if err := s.Run(e, b); err != nil {
				b.Status, b.Error = "error", err.Error()
			}
		}()
		// Whatever a benchmark left running is a harness bug; do not let it
		// disturb the next one.
		if n := harness.Live() - e.helpers(); n > 0 {
			e.Logf("%s left %d processes running; killing them", s.ID, n)
			harness.KillAll(e.etcd)
		}
		b.Host.ForeignCoresMean, b.Host.ForeignCoresPeak = in.Stop()
		b.DurationS = time.Since(start).Seconds()
		if b.Status != "ok" {
			e.Logf("%s failed: %s", s.ID, firstLine(b.Error))
		}
		e.Logf("=== %s done in %.1fs", s.ID, b.DurationS)
	}
	e.bench = nil
}

// waitQuiet waits until other processes use less than QuietCores of CPU
// over a one-second sample, for what is left of QuietWait.
func (e *Env) waitQuiet() (waited time.Duration) {
	if e.QuietWait <= 0 {
		return 0
	}
	start := time.Now()
	defer func() { e.QuietWait -= waited }()
	for {
		in := harness.StartInterference(250 * time.Millisecond)
		_ = sleepCtx(e.Ctx, time.Second)
		mean, _ := in.Stop()
		if mean < e.QuietCores || e.Ctx.Err() != nil {
			return time.Since(start)
		}
		if time.Since(start) >= e.QuietWait {
			e.Logf("host still busy (other processes use %.2f cores); going on (quiet-wait budget used up)", mean)
			return time.Since(start)
		}
		e.Logf("host busy (other processes use %.2f cores); waiting", mean)
		_ = sleepCtx(e.Ctx, 2*time.Second)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func (e *Env) helpers() int {
	if e.etcd != nil && !e.etcd.Exited() {
		return 1
	}
	return 0
}

// MachineInfo describes this machine.
func MachineInfo(work string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%d", &kb)
		m.MemTotalMB = kb / 1024
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.TmpFS = filesystemOf(work)
	return m
}

// filesystemOf returns the type of the filesystem holding path, from
// /proc/mounts (longest mount point prefix).
func filesystemOf(path string) string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return ""
	}
	best, typ := "", ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		if strings.HasPrefix(path, f[1]) && len(f[1]) > len(best) {
			best, typ = f[1], f[0]+" ("+f[2]+")"
		}
	}
	return typ
}
