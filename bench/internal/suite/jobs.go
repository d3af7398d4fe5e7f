package suite

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// window is one measurement window of a running job.
type window struct {
	Records     float64 // records into the counted vertex
	Elapsed     time.Duration
	CPU         time.Duration // all daemons: JobManager and TaskManagers
	Net         harness.NetCounters
	Exchange    exchangeCounters // both TaskManagers' remote channels
	Checkpoints float64          // completed in the window
	Failed      float64          // failed in the window
	// The counted vertex's event time (W1): records it emitted, late
	// records it dropped, how far its input watermark (the minimum over
	// its subtasks) advanced, in seconds of event time (NaN while it has
	// none), and at the window's end the timers pending and how far its
	// input watermark was behind the job's most advanced watermark (a
	// source's), in seconds of event time.
	Out, Late, EventTime, Timers, WatermarkLag float64
}

func (w window) rate() float64 { return w.Records / w.Elapsed.Seconds() }

// exchangeCounters are the weir_exchange_sent_* counters of every
// TaskManager: exactly what the remote channels sent.
type exchangeCounters struct{ Messages, Bytes, Records float64 }

func (a exchangeCounters) sub(b exchangeCounters) exchangeCounters {
	return exchangeCounters{a.Messages - b.Messages, a.Bytes - b.Bytes, a.Records - b.Records}
}

type snapshot struct {
	at          time.Time
	records     float64
	cpu         time.Duration
	net         harness.NetCounters
	exchange    exchangeCounters
	completed   float64
	failed      float64
	backpressed float64
	out         float64
	late        float64
	timers      float64
	watermark   float64 // Unix seconds; NaN before the first watermark
	// lead is the job's most advanced output watermark (a source's).
	lead float64
}

func takeSnapshot(ctx context.Context, c *harness.Cluster, job, task string) (snapshot, error) {
	var s snapshot
	m, err := c.ScrapeTMs(ctx)
	if err != nil {
		return s, err
	}
	s.at = time.Now()
	s.records = m.Sum("weir_task_records_in_total", map[string]string{"job_id": job, "task_name": task})
	s.backpressed = m.Sum("weir_task_backpressured_seconds_total", map[string]string{"job_id": job})
	vertex := map[string]string{"job_id": job, "task_name": task}
	s.out = m.Sum("weir_task_records_out_total", vertex)
	s.late = m.Sum("weir_task_late_records_dropped_total", vertex)
	s.timers = m.Sum("weir_task_timers", vertex)
	s.watermark = minSample(m, "weir_task_input_watermark_seconds", vertex)
	s.lead = -minSample(negated(m, "weir_task_output_watermark_seconds"), "weir_task_output_watermark_seconds", map[string]string{"job_id": job})
	s.exchange = exchangeCounters{
		Messages: m.Sum("weir_exchange_sent_messages_total", nil),
		Bytes:    m.Sum("weir_exchange_sent_bytes_total", nil),
		Records:  m.Sum("weir_exchange_sent_records_total", nil),
	}
	for _, pid := range c.Pids() {
		t, err := harness.CPUTime(pid)
		if err != nil {
			return s, err
		}
		s.cpu += t
	}
	s.net = harness.ReadNet()
	jm, err := c.ScrapeJM(ctx)
	if err != nil {
		return s, err
	}
	s.completed = jm.Sum("weir_job_checkpoints_completed_total", map[string]string{"job_id": job})
	s.failed = jm.Sum("weir_job_checkpoints_failed_total", map[string]string{"job_id": job})
	return s, nil
}

// minSample is the least value of the samples named name whose labels
// include every pair in match; NaN when there is none.
func minSample(m harness.Metrics, name string, match map[string]string) float64 {
	v := math.NaN()
next:
	for _, s := range m {
		if s.Name != name {
			continue
		}
		for k, want := range match {
			if s.Labels[k] != want {
				continue next
			}
		}
		if math.IsNaN(v) || s.Value < v {
			v = s.Value
		}
	}
	return v
}

// negated is m's samples named name with their values negated, for the
// maximum through minSample.
func negated(m harness.Metrics, name string) harness.Metrics {
	var out harness.Metrics
	for _, s := range m {
		if s.Name == name {
			s.Value = -s.Value
			out = append(out, s)
		}
	}
	return out
}

// sampleWindows measures n consecutive windows of length d.
func sampleWindows(e *Env, c *harness.Cluster, job, task string, n int, d time.Duration) ([]window, error) {
	prev, err := takeSnapshot(e.Ctx, c, job, task)
	if err != nil {
		return nil, err
	}
	var out []window
	for i := 0; i < n; i++ {
		select {
		case <-e.Ctx.Done():
			return nil, e.Ctx.Err()
		case <-time.After(time.Until(prev.at.Add(d))):
		}
		cur, err := takeSnapshot(e.Ctx, c, job, task)
		if err != nil {
			return nil, err
		}
		out = append(out, window{
			Records: cur.records - prev.records, Elapsed: cur.at.Sub(prev.at), CPU: cur.cpu - prev.cpu,
			Net: cur.net.Sub(prev.net), Exchange: cur.exchange.sub(prev.exchange), Checkpoints: cur.completed - prev.completed, Failed: cur.failed - prev.failed,
			Out: cur.out - prev.out, Late: cur.late - prev.late, EventTime: cur.watermark - prev.watermark, Timers: cur.timers, WatermarkLag: cur.lead - cur.watermark,
		})
		prev = cur
	}
	return out, nil
}

// runJob submits spec, waits until it runs, calls measure, then cancels
// the job. A job that does not run or fails is an error.
func runJob(e *Env, c *harness.Cluster, spec string, measure func(job string) error) error {
	job, err := c.Submit(e.Ctx, spec)
	if err != nil {
		return err
	}
	if err := c.WaitRunning(e.Ctx, job, 30*time.Second); err != nil {
		return err
	}
	merr := measure(job)
	j, err := c.Job(e.Ctx, job)
	if err == nil && j.GetState() != weirv1.JobState_JOB_STATE_RUNNING {
		e.Problem("job %s is %s after the measurement: %s", j.GetName(), j.GetState(), j.GetFailureCause())
	}
	if err := c.Cancel(e.Ctx, job); err != nil && merr == nil {
		return fmt.Errorf("cancel: %w", err)
	}
	return merr
}

// profileTMs saves a CPU profile of every live TaskManager (and of the
// JobManager when it runs bench-jobmanager) over d, when profiling is on.
func profileTMs(e *Env, b *Bench, c *harness.Cluster, name string, d time.Duration) {
	capture(e, b, c, name, "profile", "pprof", d)
}

// traceTMs saves a runtime execution trace (go tool trace) of the same
// daemons over d, when profiling is on: where a CPU profile shows work, a
// trace shows waiting (scheduler latency, blocking, the collector).
func traceTMs(e *Env, b *Bench, c *harness.Cluster, name string, d time.Duration) {
	capture(e, b, c, name, "trace", "trace", d)
}

// capture fetches /debug/pprof/<endpoint> of every daemon serving pprof.
func capture(e *Env, b *Bench, c *harness.Cluster, name, endpoint, ext string, d time.Duration) {
	if !e.Profile {
		return
	}
	type target struct{ id, addr string }
	var targets []target
	for _, t := range c.LiveTMs() {
		if t.Pprof != "" {
			targets = append(targets, target{t.ID, t.Pprof})
		}
	}
	if c.JMPprof != "" {
		targets = append(targets, target{"jm", c.JMPprof})
	}
	dir := filepath.Join(e.Results, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.Logf("profile: %v", err)
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", t.addr, endpoint, int(d.Seconds()))
			client := &http.Client{Timeout: d + 10*time.Second}
			resp, err := client.Get(url)
			if err != nil {
				e.Logf("profile %s: %v", t.id, err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				e.Logf("%s %s: %s", endpoint, t.id, resp.Status)
				return
			}
			path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.%s", b.ID, name, t.id, ext))
			f, err := os.Create(path)
			if err != nil {
				e.Logf("profile: %v", err)
				return
			}
			_, err = io.Copy(f, resp.Body)
			f.Close()
			if err == nil {
				mu.Lock()
				b.Profiles = append(b.Profiles, path)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// sleep waits d or until the run is interrupted.
func sleep(e *Env, d time.Duration) error {
	select {
	case <-e.Ctx.Done():
		return e.Ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// profileCheckpoints runs spec on a fresh cluster whose JobManager serves
// pprof and profiles every daemon for d, then traces them for 2 s, while
// checkpoints are taken one after the other: an extra, unmeasured run for
// where the time goes.
func profileCheckpoints(e *Env, b *Bench, name string, cfg harness.Config, spec string, d time.Duration) {
	if !e.Profile {
		return
	}
	cfg.PprofJM = true
	c, err := e.Cluster(b.ID+"-profile", cfg)
	if err != nil {
		e.Logf("profile run: %v", err)
		return
	}
	defer e.StopCluster(c)
	err = runJob(e, c, spec, func(job string) error {
		done := make(chan struct{})
		go func() {
			defer close(done)
			deadline := time.Now().Add(d + 3*time.Second)
			for time.Now().Before(deadline) && e.Ctx.Err() == nil {
				if _, _, err := closedLoop(e, c, job, 1); err != nil {
					return
				}
			}
		}()
		profileTMs(e, b, c, name, d)
		traceTMs(e, b, c, name, 2*time.Second)
		<-done
		return nil
	})
	if err != nil {
		e.Logf("profile run: %v", err)
	}
}
