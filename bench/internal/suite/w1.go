package suite

import (
	"fmt"
	"math"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
)

// W1's stream: B5's source (1024 keys, full speed, p=2) with event time:
// record i is stamped i ms (step 1 ms), so a key has a record about every
// 1024 ms of event time. Windows are sized for tens of records per key:
// tumbling 60 s (~58 records per key and window), sliding 600 s every
// 60 s (size/slide = 10: a record is in 10 windows, folded into one
// pane), and sessions that close every ~25 records. Event time runs as
// fast as records go, hundreds of seconds of event time per second, so the
// watermark interval is short. Even so the window's input watermark (the
// minimum of the two source subtasks') trails the records it processes:
// the source subtasks drift apart by as many records as the exchange's
// buffers hold (~20 k, tens of seconds of event time), so every key has a
// few windows open. The JSON has that lag and the timers pending per key.
const (
	w1Keys              = 1024
	w1WatermarkInterval = "10ms"
)

// w1Job is one job of W1: the op vertex between the source and the sink.
type w1Job struct {
	key    string // short name, in profiles and problems
	label  string // in the table
	op     string
	config string // the op's config (a YAML flow mapping), "" for none
	// jitter is the source's event-time jitter; "" for a source without
	// event time (the keyed-sum baseline, exactly B5's job).
	jitter string
}

// The session job's timestamps, jitter 101 ms: sequence-source stamps
// record i with i − (i mod 102) ms, so 102 records in a row share a
// timestamp and key k's records (i = k + 1024·j) come 1020 ms apart, or
// 1122 ms once in about 25.5 (1024 = 10·102 + 4: i mod 102 grows by 4 per
// record of the key and wraps every 25.5). With a gap of 1100 ms every
// record merges into its key's open session (removing it, putting the
// merged one, moving its timer), and a session closes and fires after
// about 25 records: 1 window per ~25.5 records, ~26 s of event time each.
// The timestamps never decrease within a source subtask, and a key's
// records all come from the same one, so with max-out-of-orderness 0
// nothing is late.
var w1Jobs = []w1Job{
	{"keyed-sum", "keyed-sum (B5's job), baseline", "keyed-sum", "", ""},
	{"tumbling", "tumbling 60 s", "window", "{type: tumbling, size: 60s, aggregate: sum}", "0ms"},
	{"sliding", "sliding 600 s / 60 s", "window", "{type: sliding, size: 600s, slide: 60s, aggregate: sum}", "0ms"},
	{"session", "session, gap 1100 ms", "window", "{type: session, gap: 1100ms, aggregate: sum}", "101ms"},
}

var w1Backends = []string{"heap", "pebble"}

// w1Spec is B5's throughput job (sequence-source p=2 at full speed → hash
// → op p=2 → forward → discard-sink p=2, checkpoints every second) on the
// given state backend, with event time and watermarks (max out of
// orderness 0: the watermark is the newest timestamp − 1 ms) when the job
// has a jitter.
func w1Spec(backend string, j w1Job) string {
	src := fmt.Sprintf("{count: 0, keys: %d, rate: 0}", w1Keys)
	wm := ""
	if j.jitter != "" {
		src = fmt.Sprintf("{count: 0, keys: %d, rate: 0, event-time: {step: 1ms, jitter: %s}}", w1Keys, j.jitter)
		wm = fmt.Sprintf(", watermarks: {max-out-of-orderness: 0ms, interval: %s}", w1WatermarkInterval)
	}
	cfg := ""
	if j.config != "" {
		cfg = ", config: " + j.config
	}
	return fmt.Sprintf(`name: w1-%s-%s
checkpointing: {interval: 1s, mode: exactly-once, timeout: 1m, retained: 1}
state: {backend: %s}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: %s%s}
  - {name: op, operator: %s, parallelism: 2, inputs: [{from: source, partition: hash}]%s}
  - {name: sink, operator: discard-sink, parallelism: 2, inputs: [{from: op, partition: forward}]}
`, j.key, backend, backend, src, wm, j.op, cfg)
}

// W1: records/s per core of the window operator, against keyed-sum on the
// same backend, measured like B5.
func runW1(e *Env, b *Bench) error {
	c, err := e.Cluster("w1", harness.Config{TaskManagers: 2, Slots: 2})
	if err != nil {
		return err
	}
	defer e.StopCluster(c)
	// 16 jobs of ~4 s: about a minute.
	rounds, windows, warm := 2, 2, 2*time.Second
	if e.Quick {
		rounds, warm = 1, time.Second
	}
	type acc struct {
		perCore, rate, cores, winRate, recPerWin, eventTime, timers, lag []float64
		late, silent, stalled, failed                                    float64
	}
	res := map[string]*acc{}
	id := func(backend string, j w1Job) string { return backend + "-" + j.key }
	// Interleaved rounds, so drift of the machine hits every point alike.
	for r := 0; r < rounds; r++ {
		for _, backend := range w1Backends {
			for _, j := range w1Jobs {
				e.Logf("W1 round %d: %s on %s", r+1, j.key, backend)
				err := runJob(e, c, w1Spec(backend, j), func(job string) error {
					if err := sleep(e, warm); err != nil {
						return err
					}
					ws, err := sampleWindows(e, c, job, "op", windows, time.Second)
					if err != nil {
						return err
					}
					a := res[id(backend, j)]
					if a == nil {
						a = &acc{}
						res[id(backend, j)] = a
					}
					for _, w := range ws {
						a.perCore = append(a.perCore, w.Records/w.CPU.Seconds())
						a.rate = append(a.rate, w.rate())
						a.cores = append(a.cores, w.CPU.Seconds()/w.Elapsed.Seconds())
						a.failed += w.Failed
						if j.jitter == "" {
							continue
						}
						a.winRate = append(a.winRate, w.Out/w.Elapsed.Seconds())
						if w.Out > 0 {
							a.recPerWin = append(a.recPerWin, w.Records/w.Out)
						} else {
							a.silent++
						}
						if w.EventTime > 0 {
							a.eventTime = append(a.eventTime, w.EventTime/w.Elapsed.Seconds())
						} else {
							a.stalled++
						}
						a.timers = append(a.timers, w.Timers)
						if !math.IsNaN(w.WatermarkLag) {
							a.lag = append(a.lag, w.WatermarkLag)
						}
						a.late += w.Late
					}
					if r == rounds-1 {
						profileTMs(e, b, c, id(backend, j), 3*time.Second)
					}
					return nil
				})
				if err != nil {
					return fmt.Errorf("%s on %s: %w", j.key, backend, err)
				}
			}
		}
	}
	n := float64(rounds * windows)
	for _, backend := range w1Backends {
		base := res[id(backend, w1Jobs[0])]
		bp := b.Add(backend+": "+w1Jobs[0].label, "rec/s/core", true, base.perCore)
		bp.With("records_per_s", median(base.rate))
		bp.With("cpu_cores_used", median(base.cores))
		perCore := map[string]float64{}
		for _, j := range w1Jobs[1:] {
			a := res[id(backend, j)]
			p := b.Add(backend+": "+j.label, "rec/s/core", true, a.perCore)
			p.Against("keyed-sum "+backend, bp.Median, "rec/s/core")
			perCore[j.key] = p.Median
			p.With("records_per_s", median(a.rate))
			p.With("cpu_cores_used", median(a.cores))
			p.With("windows_per_s", median(a.winRate))
			p.With("records_per_window", median(a.recPerWin))
			p.With("event_time_s_per_s", median(a.eventTime))
			p.With("timers_pending", median(a.timers))
			p.With("timers_pending_per_key", median(a.timers)/w1Keys)
			p.With("watermark_lag_event_time_s", median(a.lag))
			p.With("late_records_dropped", a.late)
			b.Add(fmt.Sprintf("  %s %s: windows emitted", backend, j.key), "win/s", true, a.winRate)
			if a.silent > 0 {
				e.Problem("%s on %s: no window fired in %.0f of %.0f measurement windows", j.key, backend, a.silent, n)
			}
			if a.stalled > 0 {
				e.Problem("%s on %s: the watermark did not advance in %.0f of %.0f measurement windows", j.key, backend, a.stalled, n)
			}
			if a.late > 0 {
				e.Problem("%s on %s: %.0f records dropped as late (the stream has none behind the watermark)", j.key, backend, a.late)
			}
		}
		for _, j := range w1Jobs {
			if f := res[id(backend, j)].failed; f > 0 {
				e.Problem("%s on %s: %.0f checkpoints failed while measuring", j.key, backend, f)
			}
		}
		// NaN does not go into the JSON report: no ratio without tumbling.
		if t := perCore["tumbling"]; t > 0 {
			ratio := perCore["sliding"] / t
			b.Add(backend+": sliding ÷ tumbling, per core", "×", true, []float64{ratio})
			b.Goal(backend+": sliding ÷ tumbling records/s/core", ratio, ">=", 0.5, "")
		}
		if backend == "heap" {
			b.Goal("heap: tumbling records/s/core", perCore["tumbling"], ">=", 1e6, "rec/s/core")
		}
	}
	b.Note("per core = records into the op vertex (keyed-sum or window) ÷ CPU time of the JobManager and both TaskManagers in the same 1 s window (%d windows × %d rounds, after %s of warm-up), as B5; the keyed-sum baseline is B5's job on the same backend, without event time", windows, rounds, warm)
	b.Note("stream: %d keys, record i at i ms, watermarks every %s with max-out-of-orderness 0, so a key has ~1 record per second of event time: ~58 records per key and 60 s tumbling window, a record in 10 sliding windows of 600 s (one pane of 60 s); session: jitter 101 ms makes a key's records 1020 ms apart and 1122 ms once in ~25.5, so with gap 1100 ms each record merges into its key's session and a session closes every ~25 records (see w1.go); windows emitted = records out of the window vertex (weir_task_records_out_total); in the JSON, watermark_lag_event_time_s is the sources' most advanced watermark minus the window's input watermark and timers_pending_per_key ≈ open windows per key", w1Keys, w1WatermarkInterval)
	return nil
}
