package suite

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
)

// The exchange's buffer configuration: the TaskManager's defaults
// (taskmanager.Config.Validate: QueueCapacity 4 buffers per output
// subpartition, 4 credits per remote input channel) and the task's batch
// size (task.New: 256 records). The daemons have no flags for them, so
// the harness repeats them here; if they change, update these.
const (
	queueCapacity = 4
	credits       = 4
	batchSize     = 256
)

// B3 pipeline: a full-speed source (p=2) hash-partitioned into a sink
// spinning 200 µs per record (p=2): every sink subtask has one local and
// one remote input channel, both full.
func backpressureSpec(name, mode string) string {
	cp := "unaligned: false"
	switch mode {
	case "unaligned":
		cp = "unaligned: true, aligned-checkpoint-timeout: 0s"
	case "aligned-timeout":
		cp = "unaligned: true, aligned-checkpoint-timeout: 100ms"
	}
	return fmt.Sprintf(`name: %s
checkpointing: {interval: 0s, mode: exactly-once, timeout: 1m, retained: 1, %s}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 0, keys: 1024, rate: 0}}
  - {name: sink, operator: spin-sink, parallelism: 2, inputs: [{from: source, partition: hash}], config: {spin: 200us}}
`, name, cp)
}

// B3: checkpoint duration under back-pressure.
func runB3(e *Env, b *Bench) error {
	c, err := e.Cluster("b3", harness.Config{TaskManagers: 2, Slots: 2})
	if err != nil {
		return err
	}
	defer e.StopCluster(c)
	const spin = 200 * time.Microsecond
	// Records queued ahead of a barrier at one sink subtask when its inputs
	// are full: the local channel's output queue, and the remote channel's
	// output queue plus the credits in flight to the consumer.
	queued := float64((queueCapacity + queueCapacity + credits) * batchSize)
	nominal := queued * spin.Seconds() * 1000 // ms

	modes := []struct{ name string }{{"aligned"}, {"unaligned"}, {"aligned-timeout"}}
	counts := map[string]int{"aligned": 8, "unaligned": 30, "aligned-timeout": 15}
	if e.Quick {
		counts = map[string]int{"aligned": 3, "unaligned": 10, "aligned-timeout": 5}
	}
	var predicted float64
	for _, m := range modes {
		e.Logf("B3: %s", m.name)
		err := runJob(e, c, backpressureSpec("b3-"+m.name, m.name), func(job string) error {
			// Fill the queues, then measure how fast the sinks drain.
			if err := sleep(e, 2*time.Second); err != nil {
				return err
			}
			ws, err := sampleWindows(e, c, job, "sink", 2, time.Second)
			if err != nil {
				return err
			}
			var rates []float64
			for _, w := range ws {
				rates = append(rates, w.rate()/2) // per sink subtask
			}
			perSubtask := median(rates)
			pred := queued / perSubtask * 1000
			if m.name == "aligned" {
				predicted = pred
			}
			var ms []float64
			for i := 0; i < counts[m.name]; i++ {
				if err := sleep(e, 200*time.Millisecond); err != nil { // queues full again
					return err
				}
				lat, _, err := closedLoop(e, c, job, 1)
				if err != nil {
					return err
				}
				ms = append(ms, float64(lat[0])/float64(time.Millisecond))
			}
			p := b.Add(m.name+": trigger → completed", "ms", false, ms)
			p.Against("predicted drain", pred, "ms")
			p.With("sink_records_per_s_per_subtask", perSubtask)
			if bd, err := breakdown(e, c, job); err == nil {
				p.With("alignment_ms_median", bd["subtask_alignment_ms_median"])
				p.With("persisted_bytes_median", bd["subtask_persisted_bytes_median"])
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	profileCheckpoints(e, b, "unaligned", harness.Config{TaskManagers: 2, Slots: 2}, backpressureSpec("b3-profile", "unaligned"), 5*time.Second)
	if p := b.Point("aligned: trigger → completed"); p != nil {
		b.Goal("aligned / predicted drain", p.Ratio, "<=", 1.2, "×")
	}
	if p := b.Point("unaligned: trigger → completed"); p != nil {
		b.Goal("unaligned p50", p.Median, "<=", 5, "ms")
	}
	b.Note("predicted drain = %.0f records queued per sink subtask ((%d + %d output buffers + %d credits) × %d records) ÷ the sinks' measured drain rate = %.0f ms (at the nominal 200 µs/record: %.0f ms); the aligned-timeout run switches to unaligned after 100 ms",
		queued, queueCapacity, queueCapacity, credits, batchSize, predicted, nominal)
	return nil
}
