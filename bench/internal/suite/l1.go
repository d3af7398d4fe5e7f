package suite

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
	"github.com/weirproject/weir/bench/internal/stats"
)

// L1 measures end-to-end latency: a record's time from its creation in
// the source to its arrival at the sink operator, through a 3-vertex
// pipeline (latency-source → bench-map → latency-sink, p=2 each, every
// edge rebalance, so half the records cross TaskManagers at each hop) on
// 2 TaskManagers, with at-least-once and with exactly-once checkpoints, at
// 10 %, 50 % and 80 % of the pipeline's own maximum throughput. Each
// point is the median over l1Windows windows of the windows' quantiles;
// the floor is the same two hops bare: twice half the gRPC stream round
// trip (the cross-TaskManager hop, the slower of the two kinds).

const (
	l1Windows   = 3
	l1Window    = 2 * time.Second
	l1Warmup    = 3 * time.Second
	l1Interval  = "1s"
	l1GoalP99US = 1000
	l1GoalRatio = 10
)

var l1Loads = []float64{0.1, 0.5, 0.8}

// l1Spec is the pipeline at rate records/s per source subtask (negative:
// as fast as it goes), its sink measuring from fromMs on.
func l1Spec(name, mode string, rate float64, dir string, fromMs int64) string {
	return fmt.Sprintf(`name: %s
checkpointing: {interval: %s, mode: %s, timeout: 1m, retained: 1}
vertices:
  - {name: source, operator: latency-source, parallelism: 2, config: {rate: %.0f}}
  - {name: map, operator: bench-map, parallelism: 2, inputs: [{from: source, partition: rebalance}]}
  - {name: sink, operator: latency-sink, parallelism: 2, inputs: [{from: map, partition: rebalance}], config: {dir: %q, from-ms: %d, window-ms: %d, windows: %d}}
`, name, l1Interval, mode, rate, dir, fromMs, l1Window.Milliseconds(), l1Windows)
}

// readLatency merges the sinks' histograms window by window.
func readLatency(dir string) ([]stats.Histogram, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.lat"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no latency files in %s", dir)
	}
	out := make([]stats.Histogram, l1Windows)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var hs []stats.Histogram
		if err := json.Unmarshal(b, &hs); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for i := range min(len(hs), len(out)) {
			out[i].Merge(&hs[i])
		}
	}
	return out, nil
}

// l1Run runs the pipeline at rate (per source subtask; negative: as fast
// as it goes) and returns the sinks' latency histograms, window by window.
// during, if not nil, runs once the warm-up is over.
func l1Run(e *Env, c *harness.Cluster, mode string, rate float64, what string, during func()) ([]stats.Histogram, error) {
	dir := filepath.Join(c.Dir(), fmt.Sprintf("l1-%s-%s", mode, what))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	from := time.Now().Add(l1Warmup)
	var hs []stats.Histogram
	err := runJob(e, c, l1Spec("l1-"+mode, mode, rate, dir, from.UnixMilli()), func(job string) error {
		if during != nil {
			if err := sleep(e, time.Until(from)); err != nil {
				return err
			}
			during()
		}
		end := from.Add(l1Windows*l1Window + 10*time.Second)
		return harness.Poll(e.Ctx, time.Until(end), 100*time.Millisecond, "the sinks' latency files", func() (bool, error) {
			files, _ := filepath.Glob(filepath.Join(dir, "*.lat"))
			if len(files) < 2 {
				return false, nil
			}
			var err error
			hs, err = readLatency(dir)
			return err == nil, err
		})
	})
	return hs, err
}

// l1Add adds the p50, p99 and p99.9 points of hs (µs, the median over
// the windows) and returns the p50's.
func l1Add(b *Bench, name string, hs []stats.Histogram, floor float64) *Point {
	var p50, p99, p999, n []float64
	for _, h := range hs {
		p50 = append(p50, h.Quantile(0.5)/1e3)
		p99 = append(p99, h.Quantile(0.99)/1e3)
		p999 = append(p999, h.Quantile(0.999)/1e3)
		n = append(n, float64(h.N))
	}
	p := b.Add(name+": p50", "µs", false, p50).Against("2 × ½ stream RTT", floor, "µs").With("records_per_s", median(n)/l1Window.Seconds())
	b.Add(name+": p99", "µs", false, p99).Against("2 × ½ stream RTT", floor, "µs")
	b.Add(name+": p99.9", "µs", false, p999).Against("2 × ½ stream RTT", floor, "µs")
	return p
}

// L1: end-to-end latency under load.
func runL1(e *Env, b *Bench) error {
	c, err := e.Cluster("l1", harness.Config{TaskManagers: 2, Slots: 2})
	if err != nil {
		return err
	}
	defer e.StopCluster(c)
	floor := 2 * us(e.Floors.StreamRTT) / 2
	for _, mode := range []string{"at-least-once", "exactly-once"} {
		// The pipeline's own capacity, to load it by fractions of it:
		// the records the sinks received per window, created while the
		// source ran as fast as it could.
		full, err := l1Run(e, c, mode, -1, "max", nil)
		if err != nil {
			return fmt.Errorf("%s capacity: %w", mode, err)
		}
		var perS []float64
		for _, h := range full {
			perS = append(perS, float64(h.N)/l1Window.Seconds())
		}
		capacity := median(perS)
		l1Add(b, mode+", as fast as it goes", full, floor).With("capacity_rec_per_s", capacity)
		for _, load := range l1Loads {
			rate := capacity * load / 2 // per source subtask
			e.Logf("L1: %s at %.0f %% (%.0f rec/s)", mode, load*100, rate*2)
			hs, err := l1Run(e, c, mode, rate, fmt.Sprintf("%.0f", load*100), nil)
			if err != nil {
				return fmt.Errorf("%s at %.0f %%: %w", mode, load*100, err)
			}
			if e.Profile && load == 0.5 {
				// An extra, unmeasured run at the same load: a runtime
				// trace, then a CPU profile, of both TaskManagers.
				name := mode + "-50"
				if _, err := l1Run(e, c, mode, rate, "50-profile", func() {
					traceTMs(e, b, c, name, 2*time.Second)
					profileTMs(e, b, c, name, 3*time.Second)
				}); err != nil {
					e.Logf("L1 profile run: %v", err)
				}
			}
			var got []float64
			for _, h := range hs {
				got = append(got, float64(h.N)/l1Window.Seconds())
			}
			if r := median(got); r < 0.9*rate*2 {
				e.Problem("L1 %s at %.0f %%: the sinks received %.0f rec/s of the %.0f asked for: overloaded, the latencies include queueing", mode, load*100, r, rate*2)
			}
			l1Add(b, fmt.Sprintf("%s, %.0f %% load", mode, load*100), hs, floor).With("source_rate_total_rec_per_s", rate*2)
		}
	}
	for _, mode := range []string{"at-least-once", "exactly-once"} {
		if p := b.Point(mode + ", 50 % load: p99"); p != nil {
			b.Goal(mode+" p99 at 50 % load", p.Median, "<=", l1GoalP99US, "µs")
			b.Goal(mode+" p99 at 50 % load / floor", p.Ratio, "<=", l1GoalRatio, "×")
		}
	}
	b.Note("latency = time.Now() at the sink operator − the record's creation stamp in the source (both Unix ns on the same host); source → map → sink, p=2 each, every edge rebalance (half the records cross TaskManagers at each hop), 2 TaskManagers, checkpoints every %s; load = the fraction of the pipeline's capacity (measured first per mode: the records the sinks received per window, created while the source ran as fast as it could); each point is the median of %d windows of %s, after %s of warm-up, each window's quantile over both sinks' records; floor = 2 × ½ gRPC stream round trip = %.1f µs",
		l1Interval, l1Windows, l1Window, l1Warmup, floor)
	return nil
}
