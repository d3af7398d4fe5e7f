package suite

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
)

// runningSumSpec is the README's running-sum job with an unbounded source
// at full speed (rate 0) and the given checkpoint interval ("0s": none).
func runningSumSpec(name, interval, out string, keys int) string {
	return fmt.Sprintf(`name: %s
checkpointing: {interval: %s, mode: exactly-once, timeout: 1m, min-pause: 0s, max-concurrent: 1, retained: 1}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 0, keys: %d, rate: 0}}
  - {name: sum, operator: keyed-sum, parallelism: 2, inputs: [{from: source, partition: hash}]}
  - {name: sink, operator: file-sink, parallelism: 2, inputs: [{from: sum, partition: forward}], config: {path: %s}}
`, name, interval, keys, strconv.Quote(out))
}

// B1: the checkpoint overhead on throughput.
func runB1(e *Env, b *Bench) error {
	c, err := e.Cluster("b1", harness.Config{TaskManagers: 2, Slots: 2, PprofJM: e.Profile})
	if err != nil {
		return err
	}
	defer e.StopCluster(c)

	type config struct{ label, interval string }
	configs := []config{{"none", "0s"}, {"1s", "1s"}, {"100ms", "100ms"}, {"10ms", "10ms"}}
	rounds, windows, warm := 3, 4, 2*time.Second
	if e.Quick {
		rounds, windows = 1, 2
	}
	type acc struct {
		rates, perCPU, cores, ckps, failed []float64
	}
	res := map[string]*acc{}
	breakdowns := map[string]map[string]float64{}
	for _, cf := range configs {
		res[cf.label] = &acc{}
	}
	// Interleaved rounds, so drift of the machine hits every point alike.
	for r := 0; r < rounds; r++ {
		for _, cf := range configs {
			out := filepath.Join(c.Dir(), "out-"+cf.label)
			spec := runningSumSpec("b1-"+cf.label, cf.interval, out, 1024)
			e.Logf("B1 round %d: checkpoints %s", r+1, cf.label)
			err := runJob(e, c, spec, func(job string) error {
				if err := sleep(e, warm); err != nil {
					return err
				}
				ws, err := sampleWindows(e, c, job, "sink", windows, time.Second)
				if err != nil {
					return err
				}
				a := res[cf.label]
				for _, w := range ws {
					a.rates = append(a.rates, w.rate())
					a.perCPU = append(a.perCPU, w.Records/w.CPU.Seconds())
					a.cores = append(a.cores, w.CPU.Seconds()/w.Elapsed.Seconds())
					a.ckps = append(a.ckps, w.Checkpoints/w.Elapsed.Seconds())
					a.failed = append(a.failed, w.Failed)
				}
				if r == rounds-1 && cf.label != "none" {
					// Where a checkpoint's time goes, from the last
					// checkpoints of the history.
					if bd, err := breakdown(e, c, job); err == nil {
						breakdowns[cf.label] = bd
					}
				}
				if r == rounds-1 && (cf.label == "10ms" || cf.label == "none") {
					// The baseline too: pprof -diff_base shows what
					// checkpoints add.
					profileTMs(e, b, c, cf.label, 5*time.Second)
				}
				return nil
			})
			os.RemoveAll(out)
			if err != nil {
				return fmt.Errorf("checkpoints %s: %w", cf.label, err)
			}
		}
	}
	base := median(res["none"].rates)
	baseCPU := median(res["none"].perCPU)
	for _, cf := range configs {
		a := res[cf.label]
		name := "checkpoints every " + cf.label
		if cf.label == "none" {
			name = "checkpointing off (baseline)"
		}
		p := b.Add(name, "rec/s", true, a.rates)
		p.With("cpu_cores", median(a.cores))
		p.With("records_per_cpu_s", median(a.perCPU))
		if cf.label != "none" {
			p.Against("off", base, "rec/s")
			p.With("cpu_normalized_ratio", median(a.perCPU)/baseCPU)
			p.With("checkpoints_completed_per_s", median(a.ckps))
			var f float64
			for _, x := range a.failed {
				f += x
			}
			p.With("checkpoints_failed", f)
			for k, v := range breakdowns[cf.label] {
				p.With(k, v)
			}
			if f > 0 {
				e.Problem("%d checkpoints failed at interval %s", int(f), cf.label)
			}
		}
	}
	b.Goal("throughput ratio at 100 ms", b.Point("checkpoints every 100ms").Ratio, ">=", 0.95, "")
	b.Goal("throughput ratio at 10 ms", b.Point("checkpoints every 10ms").Ratio, ">=", 0.85, "")
	// On a shared host the CPU share the job gets varies from window to
	// window; records per CPU-second of the daemons does not.
	b.Goal("(CPU-normalized) ratio at 100 ms", b.Point("checkpoints every 100ms").Extra["cpu_normalized_ratio"], ">=", 0.95, "")
	b.Goal("(CPU-normalized) ratio at 10 ms", b.Point("checkpoints every 10ms").Extra["cpu_normalized_ratio"], ">=", 0.85, "")
	b.Note("throughput = records into the file-sink per 1 s window (%d windows × %d interleaved rounds, %v warm-up); completed checkpoints/s: %.1f at 1 s, %.1f at 100 ms, %.1f at 10 ms; CPU-normalized = records per CPU-second of the JobManager and TaskManagers, off = %.0f",
		windows, rounds, warm, b.Point("checkpoints every 1s").Extra["checkpoints_completed_per_s"],
		b.Point("checkpoints every 100ms").Extra["checkpoints_completed_per_s"],
		b.Point("checkpoints every 10ms").Extra["checkpoints_completed_per_s"], baseCPU)
	return nil
}
