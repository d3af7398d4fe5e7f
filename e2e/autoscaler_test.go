package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/kafka/kafkatest"
)

// stepPlan is the autoscaler step test's schedule: the input at base
// records/s for warm, at factor × base for high, at base again for low.
type stepPlan struct {
	base, factor    int
	warm, high, low time.Duration
	// autoscaler is the job spec's autoscaler: block.
	autoscaler string
	// lagTarget is the lag (in seconds of the high input) the job must
	// be back under within recover of the step up.
	lagTarget float64
	recover   time.Duration
}

// The step test's plans. The short one runs in make test; the long one
// (make autoscaler-step) holds the high input for 30 minutes to show the
// parallelism does not oscillate under constant load.
var (
	shortStep = stepPlan{
		base: 120, factor: 5, warm: 15 * time.Second, high: 80 * time.Second, low: 45 * time.Second,
		autoscaler: `{enabled: true, interval: 2s, metrics-window: 8s, stabilization: 4s, scale-down-delay: 15s,
             catch-up-duration: 30s, restart-time: 2s, max-parallelism: 8, max-rescales-per-hour: 30}`,
		lagTarget: 2, recover: 70 * time.Second,
	}
	longStep = stepPlan{
		base: 120, factor: 5, warm: 2 * time.Minute, high: 30 * time.Minute, low: 10 * time.Minute,
		autoscaler: `{enabled: true, interval: 10s, metrics-window: 1m, stabilization: 30s, scale-down-delay: 2m,
             catch-up-duration: 2m, restart-time: 2s, max-parallelism: 8}`,
		lagTarget: 2, recover: 3 * time.Minute,
	}
)

// A Kafka job whose input steps 5× up and back down, scaled by its
// autoscaler alone: it reaches a parallelism that keeps up within two
// decisions, the lag (the source's group offsets behind the topic's end)
// comes back under its target, the parallelism holds while the load is
// constant, it scales down after the step down, and the output topic read
// with read_committed holds every input record exactly once. The work
// stage handles 200 records/s per subtask (a 5 ms pause per record), so
// parallelism, not this machine's speed, sets the capacity.
func TestAutoscalerStep(t *testing.T) {
	t.Parallel()
	plan := shortStep
	if os.Getenv("WEIR_AUTOSCALER_STEP") == "long" {
		plan = longStep
	}
	tm := buildSlowTaskManager(t)
	c := &cluster{t: t, dir: t.TempDir(), jmAddr: freePort(t), jmHTTP: freePort(t), tmArgs: []string{"--slots", "4"}}
	startClusterProcs(c, 2, tm)
	broker := c.startKafka(8, "in", "out")
	// Unaligned checkpoints: the work stage is back-pressured whenever the
	// input outruns it, and an aligned barrier, the rescale's included,
	// would wait behind every record queued before it.
	spec := fmt.Sprintf(`name: autoscaled
checkpointing: {interval: 500ms, mode: exactly-once, timeout: 30s, retained: 1, unaligned: true}
restart-strategy: {type: fixed-delay, attempts: 100, delay: 500ms}
autoscaler: %s
vertices:
  - {name: in, operator: kafka-source, parallelism: 1,
     config: {bootstrap-servers: %[2]q, topic: in, starting-offsets: earliest, group-id: autoscaled}}
  - {name: work, operator: slow-forward, parallelism: 1, inputs: [{from: in, partition: hash}], config: {delay: 5ms}}
  - {name: out, operator: kafka-sink, parallelism: 1, inputs: [{from: work, partition: forward}],
     config: {bootstrap-servers: %[2]q, topic: out, delivery: exactly-once, transactional-id-prefix: autoscaled, transaction-timeout: 5m}}
`, plan.autoscaler, broker)
	path := filepath.Join(c.dir, "autoscaled.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	id := c.submit(path)
	t.Cleanup(func() {
		if t.Failed() {
			out, err := c.weir("job", "autoscaler", id)
			t.Logf("the autoscaler's decisions (%v):\n%s", err, out)
		}
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	admin := kadm.NewClient(cl)
	var rate atomic.Int64
	rate.Store(int64(plan.base))
	ctx, stopProducing := context.WithCancel(context.Background())
	defer stopProducing()
	type result struct {
		n   int
		err error
	}
	produced := make(chan result, 1)
	go func() {
		n, err := produceAt(ctx, cl, &rate)
		produced <- result{n, err}
	}()

	start := time.Now()
	phase := func(format string, args ...any) {
		t.Logf("[%6.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	phase("job %s submitted; producing %d records/s", id, plan.base)
	c.watch(id, admin, plan.warm, phase)

	rate.Store(int64(plan.base * plan.factor))
	high := float64(plan.base * plan.factor)
	stepUp := time.Now()
	phase("input steps up to %.0f records/s", high)
	target := int64(plan.lagTarget * high)
	samples := c.watch(id, admin, plan.high, phase)
	end := time.Now()
	h := c.autoscalerHistory(id)
	ups := rescalesBetween(h, stepUp, end)
	// A parallelism that keeps up within two decisions (about 175
	// records/s per subtask); upward only; and settled: nothing in the
	// second half of the constant load (29 minutes in the long run).
	if len(ups) == 0 {
		t.Fatal("no rescale under the high input")
	}
	if p := ups[min(len(ups), 2)-1].to; float64(p)*170 < high {
		t.Fatalf("after two decisions work runs at %d, which does not keep up with %.0f records/s: %v", p, high, ups)
	}
	for i, r := range ups {
		if r.to < r.from {
			t.Fatalf("rescale %d under constant high input went down: %v", i, ups)
		}
		if r.at.After(stepUp.Add(plan.high / 2)) {
			t.Fatalf("rescaled in the second half of the constant load (oscillation): %v", ups)
		}
	}
	lastUp := ups[len(ups)-1].at
	var peak int64
	recovered := time.Duration(-1)
	for _, sm := range samples {
		peak = max(peak, sm.lag)
		if recovered < 0 && !sm.at.Before(lastUp) && sm.lag < target {
			recovered = sm.at.Sub(stepUp)
		}
	}
	if recovered < 0 || recovered > plan.recover {
		t.Fatalf("the lag came back under %d records (%.0f s of input) %s after the step, want within %s (peak %d)", target, plan.lagTarget, recovered, plan.recover, peak)
	}
	if last := samples[len(samples)-1]; last.lag >= target {
		t.Fatalf("at the end of the high input the lag is %d records, over its target %d: work at %d does not keep up", last.lag, target, last.p)
	}
	keptUp := c.parallelism(id, "work")
	phase("step up: %d rescale(s) %v; the lag back under %d records %.1f s after the step (peak %d); work at %d, no rescale over the %s since",
		len(ups), ups, target, recovered.Seconds(), peak, keptUp, end.Sub(lastUp).Round(time.Second))

	rate.Store(int64(plan.base))
	stepDown := time.Now()
	phase("input steps down to %d records/s", plan.base)
	c.watch(id, admin, plan.low, phase)
	downs := rescalesBetween(c.autoscalerHistory(id), stepDown, time.Now())
	if p := c.parallelism(id, "work"); len(downs) == 0 || p >= keptUp {
		t.Fatalf("after the step down: %d rescales, work at %d (was %d): want it scaled down", len(downs), p, keptUp)
	}
	phase("step down: %d rescale(s) %v; work at %d", len(downs), downs, c.parallelism(id, "work"))

	stopProducing()
	res := <-produced
	if res.err != nil {
		t.Fatal(res.err)
	}
	n := res.n
	c.waitFor(2*time.Minute, "every record committed to out", func() (bool, error) {
		return written(t, broker, "out") >= int64(n), nil
	})
	want := make([]string, n)
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	// The last records are committed with the next checkpoints: read until
	// all are there, or the wait is over and the checker says what is not.
	var got []string
	deadline := time.Now().Add(time.Minute)
	for {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		recs, err := kafkatest.ReadCommitted(rctx, "out", kgo.SeedBrokers(broker))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
		if len(got) >= n || time.Now().After(deadline) {
			break
		}
		<-time.After(500 * time.Millisecond) // the checkpoint interval: the next commit
	}
	if err := check.Lines(got, want); err != nil {
		t.Fatalf("the output is not exactly once: %v", err)
	}
	phase("exactly once: %d records produced, each committed once", n)
	for _, e := range c.autoscalerHistory(id) {
		if e.Kind == "rescaled" || e.Kind == "rescale-failed" {
			t.Logf("%s %s: %s", time.UnixMilli(e.Time).Format("15:04:05"), e.Kind, e.Reason)
		}
	}
}

// produceAt produces records 0, 1, 2, … (the value; the key spreads them
// over the partitions) to the client's topic at rate records/s, which may
// change meanwhile, until ctx ends; it returns how many it produced, all
// acknowledged, or the first error.
func produceAt(ctx context.Context, cl *kgo.Client, rate *atomic.Int64) (int, error) {
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	n, owed := 0, 0.0
	var failed atomic.Pointer[error]
	for {
		select {
		case <-ctx.Done():
			if err := cl.Flush(context.Background()); err != nil {
				return n, err
			}
			if err := failed.Load(); err != nil {
				return n, *err
			}
			return n, nil
		case <-t.C:
		}
		owed += float64(rate.Load()) * tick.Seconds()
		for ; owed >= 1; owed-- {
			v := strconv.Itoa(n)
			// Not under ctx: a record buffered when the producing stops
			// must still be written, since it is counted.
			cl.Produce(context.Background(), &kgo.Record{Key: []byte(strconv.Itoa(n % 64)), Value: []byte(v)}, func(_ *kgo.Record, err error) {
				if err != nil {
					err = fmt.Errorf("produce %s: %w", v, err)
					failed.CompareAndSwap(nil, &err)
				}
			})
			n++
		}
	}
}

// groupLag is how far group's committed offsets are behind topic's end,
// summed over the partitions: the lag Kafka's tools show.
func groupLag(admin *kadm.Client, topic, group string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	committed, err := admin.FetchOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	var lag int64
	ends.Each(func(o kadm.ListedOffset) {
		at := int64(0)
		if c, ok := committed.Lookup(topic, o.Partition); ok {
			at = c.At
		}
		lag += max(o.Offset-at, 0)
	})
	return lag, nil
}

// autoscalerEntry is an entry of weir job autoscaler -o json.
type autoscalerEntry struct {
	Time   int64  `json:"time"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

func (c *cluster) autoscalerHistory(id string) []autoscalerEntry {
	c.t.Helper()
	var v struct {
		History []autoscalerEntry `json:"history"`
	}
	if err := c.weirJSON(&v, "job", "autoscaler", id); err != nil {
		c.t.Fatal(err)
	}
	return v.History
}

// rescale is one the autoscaler carried out: work's parallelism from
// and to.
type rescale struct {
	at       time.Time
	from, to int
	reason   string
}

func (r rescale) String() string { return r.at.Format("15:04:05") + " " + r.reason }

var workStep = regexp.MustCompile(`(?:^|; )work (\d+) → (\d+)`)

// rescalesBetween are the rescales the autoscaler carried out in
// [from, to).
func rescalesBetween(h []autoscalerEntry, from, to time.Time) []rescale {
	var out []rescale
	for _, e := range h {
		at := time.UnixMilli(e.Time)
		if e.Kind == "rescaled" && !at.Before(from) && at.Before(to) {
			r := rescale{at: at, reason: strings.SplitN(e.Reason, " (", 2)[0]}
			// Each unit's step reads "<vertex> <from> → <to> (why)".
			if m := workStep.FindStringSubmatch(e.Reason); m != nil {
				r.from, _ = strconv.Atoi(m[1])
				r.to, _ = strconv.Atoi(m[2])
				r.reason = m[0]
			}
			out = append(out, r)
		}
	}
	return out
}

func (c *cluster) parallelism(id, vertex string) int {
	c.t.Helper()
	var job struct {
		Vertices []struct {
			Name        string `json:"name"`
			Parallelism int    `json:"parallelism"`
		} `json:"vertices"`
	}
	if err := c.weirJSON(&job, "job", "get", id); err != nil {
		c.t.Fatal(err)
	}
	for _, v := range job.Vertices {
		if v.Name == vertex {
			return v.Parallelism
		}
	}
	c.t.Fatalf("job %s has no vertex %s", id, vertex)
	return 0
}

// lagSample is the work vertex's parallelism and the lag at one moment.
type lagSample struct {
	at  time.Time
	p   int
	lag int64
}

// watch lets d pass, sampling the work vertex's parallelism and the lag
// every second, logging every change of parallelism, and failing if the
// job stops running.
func (c *cluster) watch(id string, admin *kadm.Client, d time.Duration, log func(string, ...any)) []lagSample {
	c.t.Helper()
	end := time.Now().Add(d)
	last := -1
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var out []lagSample
	for ; time.Now().Before(end); <-tick.C {
		var job jobJSON
		if err := c.weirJSON(&job, "job", "get", id); err != nil {
			c.t.Fatal(err)
		}
		switch job.State {
		case "FAILED", "CANCELED", "FINISHED":
			c.t.Fatalf("job %s is %s: %s", id, job.State, job.FailureCause)
		}
		p := c.parallelism(id, "work")
		if p != last {
			log("work runs at parallelism %d", p)
			last = p
		}
		if lag, err := groupLag(admin, "in", "autoscaled"); err == nil {
			out = append(out, lagSample{time.Now(), p, lag})
		}
	}
	return out
}
