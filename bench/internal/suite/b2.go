package suite

import (
	"context"
	"fmt"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// idleSpec is an idle pipeline of n subtasks: idle-source (n/2) → hash →
// ballast (n/2), every subtask holding stateBytes of operator state;
// checkpoints only on request.
func idleSpec(name string, n, stateBytes int) string {
	return fmt.Sprintf(`name: %s
checkpointing: {interval: 0s, mode: exactly-once, timeout: 1m, retained: 1}
vertices:
  - {name: source, operator: idle-source, parallelism: %d, config: {state-bytes: %d}}
  - {name: state, operator: ballast, parallelism: %d, inputs: [{from: source, partition: hash}], config: {state-bytes: %d}}
`, name, n/2, stateBytes, n/2, stateBytes)
}

// closedLoop triggers n checkpoints one after the other (each waits for
// the previous to complete) and returns each one's latency as the client
// sees it, and the total time.
func closedLoop(e *Env, c *harness.Cluster, job string, n int) ([]time.Duration, time.Duration, error) {
	out := make([]time.Duration, 0, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		// Checkpoints time out after a minute (the specs' timeout); the
		// call is bounded a little longer.
		ctx, cancel := context.WithTimeout(e.Ctx, 90*time.Second)
		t := time.Now()
		_, err := c.Client.TriggerCheckpoint(ctx, &weirv1.TriggerCheckpointRequest{JobId: job})
		d := time.Since(t)
		cancel()
		if err != nil {
			return nil, 0, fmt.Errorf("checkpoint %d of %d: %w", i+1, n, err)
		}
		out = append(out, d)
	}
	return out, time.Since(start), nil
}

// serverDurations returns end_to_end_duration_ms of the newest completed
// checkpoints in the JobManager's history (at most what it keeps).
func serverDurations(e *Env, c *harness.Cluster, job string) ([]float64, error) {
	r, err := c.Client.ListCheckpoints(e.Ctx, &weirv1.ListCheckpointsRequest{JobId: job})
	if err != nil {
		return nil, err
	}
	var out []float64
	for _, h := range r.GetHistory() {
		if h.GetStatus() == weirv1.CheckpointStatus_CHECKPOINT_STATUS_COMPLETED {
			out = append(out, float64(h.GetEndToEndDurationMs()))
		}
	}
	return out, nil
}

// ckptRun is what runs of closed-loop checkpoints on one job measured.
type ckptRun struct {
	lat []time.Duration
	// wall is the runs' time, jmCPU the JobManager's CPU time in them.
	wall, jmCPU time.Duration
	// p50 are each run's median latency, in ms.
	p50 []float64
}

// run takes n more checkpoints one after the other.
func (r *ckptRun) run(e *Env, c *harness.Cluster, job string, n int) error {
	jm0, _ := harness.CPUTime(c.JM.Pid())
	lat, total, err := closedLoop(e, c, job, n)
	if err != nil {
		return err
	}
	jm1, _ := harness.CPUTime(c.JM.Pid())
	r.lat = append(r.lat, lat...)
	r.wall += total
	r.jmCPU += jm1 - jm0
	r.p50 = append(r.p50, median(millis(lat)))
	return nil
}

func millis(ds []time.Duration) []float64 {
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	return ms
}

// addCkptPoints records r as a latency point named "<prefix>: trigger →
// completed (client)" and a rate point "<prefix>: closed-loop rate", with
// what the JobManager's history says of job.
func addCkptPoints(e *Env, b *Bench, c *harness.Cluster, job, prefix string, r *ckptRun) (lat *Point, rate float64) {
	p := b.Add(prefix+": trigger → completed (client)", "ms", false, millis(r.lat))
	f := e.Floors
	floor := 2*f.UnaryRTT + f.Fsync
	p.Against("floor 2×unary RTT + fsync", float64(floor)/float64(time.Millisecond), "ms")
	rate = float64(len(r.lat)) / r.wall.Seconds()
	p.With("checkpoints_per_s", rate)
	p.With("jm_cpu_ms_per_checkpoint", float64(r.jmCPU)/float64(time.Millisecond)/float64(len(r.lat)))
	srv, err := serverDurations(e, c, job)
	if err == nil && len(srv) > 0 {
		p.With("jm_end_to_end_ms_median", median(srv))
	}
	if bd, err := breakdown(e, c, job); err == nil {
		for k, v := range bd {
			p.With(k, v)
		}
	}
	b.Add(prefix+": closed-loop rate", "ckpt/s", true, chunkRates(r.lat, ckptChunk))
	return p, rate
}

// ckptChunk is the run of checkpoints a rate is reported for, and at 8
// subtasks the run of checkpoints taken on one cluster before the other.
const ckptChunk = 50

// B2: checkpoint latency of an idle pipeline, on plaintext and, at 8
// subtasks, on mutual TLS.
func runB2(e *Env, b *Bench) error {
	c, err := e.Cluster("b2", harness.Config{TaskManagers: 2, Slots: 8})
	if err != nil {
		return err
	}
	defer e.StopCluster(c)
	// Up for the whole benchmark, idle but for its turns at 8 subtasks.
	ct, err := e.TLSCluster("b2-mtls", harness.Config{TaskManagers: 2, Slots: 8})
	if err != nil {
		return fmt.Errorf("mTLS cluster: %w", err)
	}
	defer e.StopCluster(ct)
	n, warm := 300, 30
	if e.Quick {
		n, warm = 100, 10
	}
	var plain8, tls8 *ckptRun
	var tls8Job string
	for _, subtasks := range []int{4, 8, 16} {
		spec := idleSpec(fmt.Sprintf("b2-%d", subtasks), subtasks, 1024)
		if subtasks != 8 {
			e.Logf("B2: %d subtasks, %d checkpoints", subtasks, n)
			err := runJob(e, c, spec, func(job string) error {
				if _, _, err := closedLoop(e, c, job, warm); err != nil {
					return err
				}
				r := &ckptRun{}
				if err := r.run(e, c, job, n); err != nil {
					return err
				}
				addCkptPoints(e, b, c, job, fmt.Sprintf("%d subtasks", subtasks), r)
				return nil
			})
			if err != nil {
				return fmt.Errorf("%d subtasks: %w", subtasks, err)
			}
			continue
		}
		// The same job runs on both clusters at once; runs of ckptChunk
		// checkpoints alternate between them (ABBA), so drift of the
		// machine hits plaintext and mTLS alike.
		e.Logf("B2: %d subtasks, %d checkpoints on plaintext and %d on mTLS, interleaved", subtasks, n, n)
		err := runJob(e, c, spec, func(job string) error {
			return runJob(e, ct, spec, func(tjob string) error {
				for _, x := range []struct {
					c   *harness.Cluster
					job string
				}{{c, job}, {ct, tjob}} {
					if _, _, err := closedLoop(e, x.c, x.job, warm); err != nil {
						return err
					}
				}
				plain8, tls8, tls8Job = &ckptRun{}, &ckptRun{}, tjob
				for i := 0; i*ckptChunk < n; i++ {
					size := min(ckptChunk, n-i*ckptChunk)
					first, second := func() error { return plain8.run(e, c, job, size) }, func() error { return tls8.run(e, ct, tjob, size) }
					if i%2 == 1 {
						first, second = second, first
					}
					if err := first(); err != nil {
						return err
					}
					if err := second(); err != nil {
						return fmt.Errorf("mTLS: %w", err)
					}
				}
				p, rate := addCkptPoints(e, b, c, job, "8 subtasks", plain8)
				b.Goal("p50 latency at 8 subtasks", p.Median, "<=", 1.5, "ms")
				b.Goal("p99 latency at 8 subtasks", p.P99, "<=", 15, "ms")
				b.Goal("closed-loop checkpoints/s at 8 subtasks", rate, ">=", 300, "ckpt/s")
				b.Goal("p50 / floor at 8 subtasks", p.Ratio, "<=", 2, "×")
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("%d subtasks: %w", subtasks, err)
		}
	}
	// Mutual TLS: TriggerCheckpoint, the triggers, the acknowledgements
	// and the completions all go over TLS 1.3 connections already set up.
	plain := b.Point("8 subtasks: trigger → completed (client)")
	p, _ := addCkptPoints(e, b, ct, tls8Job, "8 subtasks with mTLS", tls8)
	p.Against("plaintext", plain.Median, "ms")
	added := p.Median - plain.Median
	p.With("added_p50_ms", added)
	p.With("added_p99_ms", p.P99-plain.P99)
	var diffs []float64
	for i := range min(len(tls8.p50), len(plain8.p50)) {
		diffs = append(diffs, tls8.p50[i]-plain8.p50[i])
	}
	b.Add(fmt.Sprintf("  8 subtasks: mTLS − plaintext p50, run of %d by run", ckptChunk), "ms", false, diffs)
	b.Goal("added p50 latency with mTLS at 8 subtasks", added, "<=", 0.5, "ms")
	profileCheckpoints(e, b, "8-subtasks", harness.Config{TaskManagers: 2, Slots: 8}, idleSpec("b2-profile", 8, 1024), 5*time.Second)
	b.Note("latency is timed by the client around TriggerCheckpoint (waits for completion), so it includes the client→JobManager round trip on top of the floor's two; each subtask holds 1 KiB of operator state and writes it with fsync; %d checkpoints one after the other per point, the rate is reported per run of %d (goal checked on the overall rate)", n, ckptChunk)
	b.Note("with mTLS: the 8-subtask job on a second cluster whose JobManager and TaskManagers run with --tls-cert/--tls-key/--tls-ca (the harness's client with a client certificate), the same job running on both clusters at once and runs of %d checkpoints alternating between them, ABBA; its ratio is mTLS ÷ plaintext p50, added_p50_ms the difference", ckptChunk)
	return nil
}

// breakdown describes the newest completed checkpoints in the history from
// the subtasks' side (all in ms, the API's resolution): when the last ack
// arrived after the trigger, and the subtasks' synchronous and
// asynchronous (state write + fsync) parts.
func breakdown(e *Env, c *harness.Cluster, job string) (map[string]float64, error) {
	r, err := c.Client.ListCheckpoints(e.Ctx, &weirv1.ListCheckpointsRequest{JobId: job})
	if err != nil {
		return nil, err
	}
	var lastAck, async, sync, delay, align, persisted []float64
	// The slowest subtask of each checkpoint: the one its completion waits for.
	var maxAsync, maxSync, maxDelay, maxAlign []float64
	for _, h := range r.GetHistory() {
		if h.GetStatus() != weirv1.CheckpointStatus_CHECKPOINT_STATUS_COMPLETED {
			continue
		}
		d, err := c.Client.GetCheckpoint(e.Ctx, &weirv1.GetCheckpointRequest{JobId: job, CheckpointId: h.GetId()})
		if err != nil {
			continue // subsumed and dropped from the history meanwhile
		}
		lastAck = append(lastAck, float64(h.GetLatestAckTimestampMs()-h.GetTriggerTimestampMs()))
		var ma, ms, md, mal float64
		for _, st := range d.GetSubtasks() {
			m := st.GetMetrics()
			async = append(async, float64(m.GetAsyncDurationMs()))
			sync = append(sync, float64(m.GetSyncDurationMs()))
			delay = append(delay, float64(m.GetStartDelayMs()))
			align = append(align, float64(m.GetAlignmentDurationMs()))
			persisted = append(persisted, float64(m.GetBytesPersistedDuringAlignment()))
			ma, ms = max(ma, float64(m.GetAsyncDurationMs())), max(ms, float64(m.GetSyncDurationMs()))
			md, mal = max(md, float64(m.GetStartDelayMs())), max(mal, float64(m.GetAlignmentDurationMs()))
		}
		maxAsync, maxSync, maxDelay, maxAlign = append(maxAsync, ma), append(maxSync, ms), append(maxDelay, md), append(maxAlign, mal)
	}
	if len(lastAck) == 0 {
		return nil, fmt.Errorf("no completed checkpoint in the history of %s", job)
	}
	return map[string]float64{
		"slowest_subtask_async_ms_median":       median(maxAsync),
		"slowest_subtask_sync_ms_median":        median(maxSync),
		"slowest_subtask_start_delay_ms_median": median(maxDelay),
		"slowest_subtask_alignment_ms_median":   median(maxAlign),
		"last_ack_after_trigger_ms_median":      median(lastAck),
		"subtask_async_ms_median":               median(async),
		"subtask_sync_ms_median":                median(sync),
		"subtask_start_delay_ms_median":         median(delay),
		"subtask_alignment_ms_median":           median(align),
		"subtask_persisted_bytes_median":        median(persisted),
		"history_checkpoints":                   float64(len(lastAck)),
	}, nil
}

// chunkRates splits closed-loop latencies into runs of size and returns
// each run's rate (checkpoints per second of the run's total latency).
func chunkRates(lat []time.Duration, size int) []float64 {
	var out []float64
	for i := 0; i+size <= len(lat); i += size {
		var sum time.Duration
		for _, l := range lat[i : i+size] {
			sum += l
		}
		out = append(out, float64(size)/sum.Seconds())
	}
	return out
}
