package suite

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/bench/internal/harness"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// K1 measures Weir between Kafka topics: kafka-source → bench-map →
// kafka-sink, exactly-once, p=2 on 2 TaskManagers, against what franz-go
// itself costs in the harness process, all against one kafka-dev broker
// (franz-go's kfake, bin/kafka-dev) in its own process.
//
// The input topic (4 partitions) is filled once by a plain (idempotent)
// franz-go producer: record i has key i mod 1024 and value i as 16
// zero-padded decimal digits. Each round runs the job once over the whole
// topic (starting-offsets: earliest, bounded: latest) into an output topic
// of its own, measures 1 s windows in the middle of it as B5 does
// (records into the sink ÷ CPU time of the JobManager and both
// TaskManagers; the broker's CPU is reported apart), waits for the job to
// finish and checks that the output, read with read_committed, holds every
// input value exactly once. The same round measures the floors from the
// harness process: an idempotent producer, a transactional producer
// committing once a second (what the exactly-once sink does), and a
// read_committed consumer reading the input topic from its start (what the
// source does), each as records per second of the harness's CPU time. The
// floor of a consume → produce pipeline is the CPU per record of the
// consumer plus that of the transactional producer.
const (
	k1Partitions = 4
	k1Keys       = 1024
	k1In         = "k1-in"
	// k1TxnTimeout must be at least the checkpoint timeout (30 s) plus
	// the restart delay (none: a benchmark that restarts is broken), or
	// the job graph's validation refuses the sink.
	k1TxnTimeout = time.Minute
	// k1ValueLen is the width of a record's value: i, zero-padded.
	k1ValueLen = 16
)

// k1Spec is K1's job: kafka-source (p=2, the whole input topic, then
// finish) → forward → bench-map → forward → kafka-sink (p=2,
// exactly-once), checkpoints every second. Forward edges keep a record in
// its TaskManager, as a consume → produce loop in one process does.
func k1Spec(name, broker, out, prefix string) string {
	return fmt.Sprintf(`name: %[1]s
checkpointing: {interval: 1s, mode: exactly-once, timeout: 30s, retained: 1}
restart-strategy: {type: none}
vertices:
  - {name: source, operator: kafka-source, parallelism: 2,
     config: {bootstrap-servers: %[2]q, topic: %[3]s, starting-offsets: earliest, bounded: latest, isolation: read-committed}}
  - {name: map, operator: bench-map, parallelism: 2, inputs: [{from: source, partition: forward}]}
  - {name: sink, operator: kafka-sink, parallelism: 2, inputs: [{from: map, partition: forward}],
     config: {bootstrap-servers: %[2]q, topic: %[4]s, delivery: exactly-once, transactional-id-prefix: %[5]s, transaction-timeout: %[6]s}}
`, name, broker, k1In, out, prefix, strings.TrimSuffix(k1TxnTimeout.String(), "0s"))
}

// k1Combined is the floor per core of a pipeline that consumes at
// consume records/s/core and produces at produce records/s/core: CPU
// seconds per record add up.
func k1Combined(consume, produce float64) float64 {
	if consume <= 0 || produce <= 0 {
		return 0
	}
	return 1 / (1/consume + 1/produce)
}

// k1Value is record i's value: i as 16 zero-padded decimal digits.
func k1Value(i int64) []byte {
	b := make([]byte, k1ValueLen)
	for j := k1ValueLen - 1; j >= 0; j-- {
		b[j] = byte('0' + i%10)
		i /= 10
	}
	return b
}

// k1Seq reads a value k1Value wrote.
func k1Seq(v []byte) (int64, bool) {
	if len(v) != k1ValueLen {
		return 0, false
	}
	var i int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int64(c-'0')
	}
	return i, true
}

// k1KeyTable holds the keys of records, i mod k1Keys in decimal.
var k1KeyTable = func() [][]byte {
	k := make([][]byte, k1Keys)
	for i := range k {
		k[i] = strconv.AppendInt(nil, int64(i), 10)
	}
	return k
}()

// k1Check is what a read_committed read of an output topic found against
// the n values 0..n-1 expected once each.
type k1Check struct {
	Read, Missing, Duplicates, Foreign int64
}

func (c k1Check) ok() bool { return c.Missing == 0 && c.Duplicates == 0 && c.Foreign == 0 }

// k1Tally counts values into seen (a bitset of n bits).
type k1Tally struct {
	n    int64
	seen []uint64
	k1Check
}

func newK1Tally(n int64) *k1Tally { return &k1Tally{n: n, seen: make([]uint64, (n+63)/64)} }

func (t *k1Tally) add(v []byte) {
	t.Read++
	i, ok := k1Seq(v)
	if !ok || i < 0 || i >= t.n {
		t.Foreign++
		return
	}
	w, bit := i/64, uint64(1)<<(i%64)
	if t.seen[w]&bit != 0 {
		t.Duplicates++
		return
	}
	t.seen[w] |= bit
}

func (t *k1Tally) result() k1Check {
	c := t.k1Check
	c.Missing = t.n - (c.Read - c.Duplicates - c.Foreign)
	return c
}

// k1Env is what a K1 run shares: the broker and its clients' settings.
type k1Env struct {
	e      *Env
	addr   string
	broker *harness.Proc
	adm    *kadm.Client
	admCl  *kgo.Client
	n      int64 // records in the input topic
}

func (k *k1Env) brokerCPU() time.Duration {
	t, _ := harness.CPUTime(k.broker.Pid())
	return t
}

func (k *k1Env) createTopic(ctx context.Context, topic string) error {
	resp, err := k.adm.CreateTopics(ctx, k1Partitions, 1, nil, topic)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// deleteTopic drops a topic the round is done with: kfake keeps every
// record in memory.
func (k *k1Env) deleteTopic(topic string) {
	ctx, cancel := context.WithTimeout(k.e.Ctx, 30*time.Second)
	defer cancel()
	if _, err := k.adm.DeleteTopics(ctx, topic); err != nil {
		k.e.Logf("K1: delete topic %s: %v", topic, err)
	}
}

// floorRun is one measurement of a franz-go client in this process.
type floorRun struct {
	Records   int64
	Elapsed   time.Duration
	CPU       time.Duration // this process
	BrokerCPU time.Duration
}

func (f floorRun) perCore() float64 { return float64(f.Records) / f.CPU.Seconds() }
func (f floorRun) rate() float64    { return float64(f.Records) / f.Elapsed.Seconds() }
func (f floorRun) brokerUS() float64 {
	return f.BrokerCPU.Seconds() * 1e6 / float64(f.Records)
}

// measure runs body, timing it and the CPU of this process and of the
// broker.
func (k *k1Env) measure(body func() (int64, error)) (floorRun, error) {
	b0, c0, t0 := k.brokerCPU(), harness.SelfCPUTime(), time.Now()
	n, err := body()
	f := floorRun{Records: n, Elapsed: time.Since(t0), CPU: harness.SelfCPUTime() - c0, BrokerCPU: k.brokerCPU() - b0}
	if err == nil && n == 0 {
		err = errors.New("no records")
	}
	return f, err
}

// firstErr keeps the first error of produce callbacks.
type firstErr struct {
	mu  sync.Mutex
	err error
}

func (f *firstErr) promise(_ *kgo.Record, err error) {
	if err != nil {
		f.mu.Lock()
		if f.err == nil {
			f.err = err
		}
		f.mu.Unlock()
	}
}

func (f *firstErr) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// fill adds n records to the input, keys i mod 1024 and values i from
// the next i on, with a plain idempotent producer.
func (k *k1Env) fill(n int64) (floorRun, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.addr), kgo.DefaultProduceTopic(k1In))
	if err != nil {
		return floorRun{}, err
	}
	defer cl.Close()
	return k.measure(func() (int64, error) {
		var fe firstErr
		promise := fe.promise
		for i := k.n; i < k.n+n; i++ {
			cl.Produce(k.e.Ctx, &kgo.Record{Key: k1KeyTable[i%k1Keys], Value: k1Value(i)}, promise)
		}
		if err := cl.Flush(k.e.Ctx); err != nil {
			return 0, err
		}
		if err := fe.get(); err != nil {
			return 0, err
		}
		k.n += n
		return n, nil
	})
}

// k1Pool are values the produce floors reuse (their topics are not
// checked): the floor does not pay for making values.
var k1Pool = func() [][]byte {
	p := make([][]byte, 1<<14)
	for i := range p {
		p[i] = k1Value(int64(i))
	}
	return p
}()

// produceFloor produces records like the input's to topic for about d:
// transactional with one transaction per second (begin, produce, flush,
// commit), as the exactly-once sink does, or plain idempotent.
func (k *k1Env) produceFloor(topic string, txn bool, d time.Duration) (floorRun, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(k.addr), kgo.DefaultProduceTopic(topic)}
	if txn {
		opts = append(opts, kgo.TransactionalID("k1-floor-"+topic), kgo.TransactionTimeout(k1TxnTimeout))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return floorRun{}, err
	}
	defer cl.Close()
	ctx := k.e.Ctx
	return k.measure(func() (int64, error) {
		var fe firstErr
		promise := fe.promise
		var i int64
		start := time.Now()
		for t := 1; time.Since(start) < d; t++ {
			if txn {
				if err := cl.BeginTransaction(); err != nil {
					return i, err
				}
			}
			end := start.Add(time.Duration(t) * time.Second)
			for time.Now().Before(end) {
				for j := 0; j < 256; j++ {
					cl.Produce(ctx, &kgo.Record{Key: k1KeyTable[i%k1Keys], Value: k1Pool[i%int64(len(k1Pool))]}, promise)
					i++
				}
			}
			if err := cl.Flush(ctx); err != nil {
				return i, err
			}
			if txn {
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					return i, err
				}
			}
			if err := fe.get(); err != nil {
				return i, err
			}
		}
		return i, nil
	})
}

// consumeFloor reads the input topic from its start to its end with
// read_committed, as kafka-source does, counting the records.
func (k *k1Env) consumeFloor() (floorRun, error) {
	var cl *kgo.Client
	f, err := k.measure(func() (int64, error) {
		var err error
		cl, err = kgo.NewClient(kgo.SeedBrokers(k.addr), kgo.ConsumeTopics(k1In),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return 0, err
		}
		var got, bytes int64
		for got < k.n {
			ctx, cancel := context.WithTimeout(k.e.Ctx, 10*time.Second)
			fs := cl.PollFetches(ctx)
			cancel()
			if k.e.Ctx.Err() != nil {
				return got, k.e.Ctx.Err()
			}
			if fs.IsClientClosed() || (fs.Empty() && ctx.Err() != nil) {
				return got, fmt.Errorf("consumed %d of %d records: nothing more within 10s", got, k.n)
			}
			for _, fe := range fs.Errors() {
				if !errors.Is(fe.Err, context.DeadlineExceeded) {
					return got, fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
				}
			}
			fs.EachRecord(func(r *kgo.Record) {
				got++
				bytes += int64(len(r.Value))
			})
		}
		return got, nil
	})
	if cl != nil {
		cl.Close()
	}
	if err == nil && f.Records != k.n {
		err = fmt.Errorf("consumed %d records, the input has %d", f.Records, k.n)
	}
	return f, err
}

// verify reads topic with read_committed from its start and tallies its
// values against 0..n-1: what a downstream consumer of the job sees.
func (k *k1Env) verify(topic string) (k1Check, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.addr), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return k1Check{}, err
	}
	defer cl.Close()
	t := newK1Tally(k.n)
	// Until n records came and nothing more within a short wait (a
	// duplicate would come after), or nothing within 5 s (missing).
	for {
		wait := 5 * time.Second
		if t.Read >= k.n {
			wait = 500 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(k.e.Ctx, wait)
		fs := cl.PollFetches(ctx)
		cancel()
		if k.e.Ctx.Err() != nil {
			return t.result(), k.e.Ctx.Err()
		}
		got := false
		fs.EachRecord(func(r *kgo.Record) {
			got = true
			t.add(r.Value)
		})
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return t.result(), fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		if !got {
			return t.result(), nil
		}
	}
}

// k1Window is one window of the running job.
type k1Window struct {
	window
	BrokerCPU time.Duration
}

// k1Round is what one run of the job measured.
type k1Round struct {
	Windows []k1Window
	// The whole job, submit → FINISHED.
	Total     floorRun // CPU: the cluster's daemons
	Check     k1Check
	StillRuns bool // the job was RUNNING after the last window
	// Fewer is how many windows were left out: the input would have ended
	// in them.
	Fewer int
}

// runJob runs K1's job once over the whole input into a fresh output
// topic: warm, then windows of 1 s, then to its end; then checks the
// output. profile, when set, is called instead of the windows.
func (k *k1Env) runJob(c *harness.Cluster, name string, warm time.Duration, windows int, profile func()) (k1Round, error) {
	e := k.e
	var res k1Round
	out := "k1-out-" + name
	if err := k.createTopic(e.Ctx, out); err != nil {
		return res, err
	}
	defer k.deleteTopic(out)
	cpu0, b0, t0 := clusterCPU(c), k.brokerCPU(), time.Now()
	job, err := c.Submit(e.Ctx, k1Spec("k1-"+name, k.addr, out, "k1-"+name))
	if err != nil {
		return res, err
	}
	finished := false
	defer func() {
		if !finished {
			_ = c.Cancel(e.Ctx, job)
		}
	}()
	if err := c.WaitRunning(e.Ctx, job, 30*time.Second); err != nil {
		return res, err
	}
	running := time.Now()
	if err := sleep(e, warm); err != nil {
		return res, err
	}
	if profile != nil {
		profile()
	} else {
		prev, err := takeSnapshot(e.Ctx, c, job, "sink")
		if err != nil {
			return res, err
		}
		prevB := k.brokerCPU()
		// As many windows as the input left lasts at the warm-up's rate,
		// less a second: the job's last moments, partitions ending one by
		// one, are no steady state.
		if prev.records > 0 {
			left := time.Duration(float64(k.n-int64(prev.records)) / prev.records * float64(prev.at.Sub(running)))
			if fit := int((left - time.Second) / time.Second); fit < windows {
				res.Fewer = windows - max(fit, 0)
				windows = max(fit, 0)
			}
		}
		for i := 0; i < windows; i++ {
			if err := sleep(e, time.Until(prev.at.Add(time.Second))); err != nil {
				return res, err
			}
			cur, err := takeSnapshot(e.Ctx, c, job, "sink")
			if err != nil {
				return res, err
			}
			curB := k.brokerCPU()
			res.Windows = append(res.Windows, k1Window{window: window{
				Records: cur.records - prev.records, Elapsed: cur.at.Sub(prev.at), CPU: cur.cpu - prev.cpu,
				Checkpoints: cur.completed - prev.completed, Failed: cur.failed - prev.failed,
			}, BrokerCPU: curB - prevB})
			prev, prevB = cur, curB
		}
		if j, err := c.Job(e.Ctx, job); err == nil {
			res.StillRuns = j.GetState() == weirv1.JobState_JOB_STATE_RUNNING
		}
	}
	err = harness.Poll(e.Ctx, 5*time.Minute, 20*time.Millisecond, "job "+name+" finished", func() (bool, error) {
		j, err := c.Job(e.Ctx, job)
		if err != nil {
			return false, err
		}
		switch j.GetState() {
		case weirv1.JobState_JOB_STATE_FINISHED:
			return true, nil
		case weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED:
			return false, fmt.Errorf("job %s %s: %s", name, j.GetState(), j.GetFailureCause())
		}
		return false, nil
	})
	if err != nil {
		return res, err
	}
	finished = true
	res.Total = floorRun{Records: k.n, Elapsed: time.Since(t0), CPU: clusterCPU(c) - cpu0, BrokerCPU: k.brokerCPU() - b0}
	res.Check, err = k.verify(out)
	return res, err
}

// clusterCPU is the CPU time of the cluster's daemons.
func clusterCPU(c *harness.Cluster) time.Duration {
	var s time.Duration
	for _, pid := range c.Pids() {
		t, _ := harness.CPUTime(pid)
		s += t
	}
	return s
}

// start starts bin/kafka-dev with the input topic in dir, waits until it
// listens, and connects the admin client.
func (k *k1Env) start(dir string) error {
	e := k.e
	prog := filepath.Join(filepath.Dir(e.Bin.TaskManager), "kafka-dev")
	if _, err := os.Stat(prog); err != nil {
		return fmt.Errorf("%w (build it: make bench, or go build -o bin/ ./cmd/kafka-dev)", err)
	}
	k.addr = harness.FreeAddr()
	p, err := harness.Start("kafka-dev", prog, harness.LogPath(dir, "kafka-dev"), nil,
		"--listen", k.addr, "--data-dir", filepath.Join(dir, "kafka"),
		"--partitions", strconv.Itoa(k1Partitions), "--topics", k1In)
	if err != nil {
		return err
	}
	k.broker = p
	err = harness.Poll(e.Ctx, 30*time.Second, 20*time.Millisecond, "kafka-dev listening", func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("kafka-dev exited: %s", p.Tail(2000))
		}
		b, _ := os.ReadFile(p.Log)
		if !strings.Contains(string(b), "kafka-dev broker listening") {
			return false, nil
		}
		conn, err := net.DialTimeout("tcp", k.addr, time.Second)
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
	if err != nil {
		return err
	}
	k.admCl, err = kgo.NewClient(kgo.SeedBrokers(k.addr))
	if err != nil {
		return err
	}
	k.adm = kadm.NewClient(k.admCl)
	return nil
}

func (k *k1Env) stop() {
	if k.admCl != nil {
		k.admCl.Close()
	}
	if k.broker != nil {
		if err := k.broker.Stop(20 * time.Second); err != nil {
			k.e.Problem("kafka-dev shutdown: %v", err)
		}
	}
}

// profileFloor saves a CPU profile of this process while it runs the
// consume floor and the transactional produce floor, to compare with the
// TaskManagers' profiles.
func (k *k1Env) profileFloor(b *Bench) {
	dir := filepath.Join(k.e.Results, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		k.e.Logf("profile: %v", err)
		return
	}
	path := filepath.Join(dir, "K1-franz-go-floor-harness.pprof")
	f, err := os.Create(path)
	if err != nil {
		k.e.Logf("profile: %v", err)
		return
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		k.e.Logf("profile: %v", err)
		return
	}
	const topic = "k1-floor-profile"
	err = k.createTopic(k.e.Ctx, topic)
	if err == nil {
		if _, err = k.consumeFloor(); err == nil {
			_, err = k.produceFloor(topic, true, 3*time.Second)
		}
	}
	pprof.StopCPUProfile()
	k.deleteTopic(topic)
	if err != nil {
		k.e.Logf("profile floor: %v", err)
		return
	}
	b.Profiles = append(b.Profiles, path)
}

// K1: Weir between Kafka topics, exactly once, against franz-go alone.
func runK1(e *Env, b *Bench) error {
	dir := filepath.Join(e.Work, "k1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The job goes through ~1.5–2 M records/s on 2 cores: 14 M records
	// last the warm-up, the windows and a margin. A round that could not
	// fit its windows adds records to the input for the next ones.
	k := &k1Env{e: e}
	n, rounds, windows, warm := int64(14_000_000), 3, 4, 1500*time.Millisecond
	if e.Quick {
		n, rounds, windows, warm = 9_000_000, 1, 2, time.Second
	}
	defer k.stop()
	if err := k.start(dir); err != nil {
		return err
	}
	c, err := e.Cluster("k1", harness.Config{TaskManagers: 2, Slots: 2})
	if err != nil {
		return err
	}
	defer e.StopCluster(c)

	e.Logf("K1: filling %s with %d records", k1In, n)
	fill, err := k.fill(n)
	if err != nil {
		return fmt.Errorf("fill %s: %w", k1In, err)
	}

	type acc struct{ perCore, rate, broker []float64 }
	weir, idem, txn, cons := &acc{}, &acc{}, &acc{}, &acc{}
	var totPerCore, totRate, totBroker, ckpts, roundRatios []float64
	var failed float64
	var fewer []string
	floorsOnce := func(r int) (consume, produce float64, err error) {
		for _, f := range []struct {
			a   *acc
			run func() (floorRun, error)
		}{
			{idem, func() (floorRun, error) {
				t := fmt.Sprintf("k1-floor-idem-%d", r)
				defer k.deleteTopic(t)
				if err := k.createTopic(e.Ctx, t); err != nil {
					return floorRun{}, err
				}
				return k.produceFloor(t, false, time.Second)
			}},
			{txn, func() (floorRun, error) {
				t := fmt.Sprintf("k1-floor-txn-%d", r)
				defer k.deleteTopic(t)
				if err := k.createTopic(e.Ctx, t); err != nil {
					return floorRun{}, err
				}
				return k.produceFloor(t, true, 3*time.Second)
			}},
			{cons, k.consumeFloor},
		} {
			fr, err := f.run()
			if err != nil {
				return 0, 0, err
			}
			f.a.perCore = append(f.a.perCore, fr.perCore())
			f.a.rate = append(f.a.rate, fr.rate())
			f.a.broker = append(f.a.broker, fr.brokerUS())
		}
		return cons.perCore[len(cons.perCore)-1], txn.perCore[len(txn.perCore)-1], nil
	}
	for r := 1; r <= rounds; r++ {
		var floor, job float64
		jobOnce := func() error {
			e.Logf("K1 round %d: Weir job", r)
			res, err := k.runJob(c, strconv.Itoa(r), warm, windows, nil)
			if err != nil {
				return err
			}
			if !res.StillRuns {
				e.Problem("round %d: the job finished before its %d windows ended (input of %d records too small): windows dropped", r, len(res.Windows), k.n)
			}
			var pcs []float64
			for _, w := range res.Windows {
				failed += w.Failed
				if !res.StillRuns {
					continue
				}
				pc := w.Records / w.CPU.Seconds()
				pcs = append(pcs, pc)
				weir.perCore = append(weir.perCore, pc)
				weir.rate = append(weir.rate, w.rate())
				weir.broker = append(weir.broker, w.BrokerCPU.Seconds()*1e6/w.Records)
				ckpts = append(ckpts, w.Checkpoints/w.Elapsed.Seconds())
			}
			job = median(pcs)
			totPerCore = append(totPerCore, res.Total.perCore())
			totRate = append(totRate, res.Total.rate())
			totBroker = append(totBroker, res.Total.brokerUS())
			if !res.Check.ok() {
				e.Problem("round %d: the output topic read with read_committed has %d records for %d input records: %d missing, %d duplicated, %d not from the input",
					r, res.Check.Read, k.n, res.Check.Missing, res.Check.Duplicates, res.Check.Foreign)
			} else {
				e.Logf("K1 round %d: output checked: %d records, each input record once", r, res.Check.Read)
			}
			if res.Fewer > 0 {
				// The harness's sizing, not the system's problem: more
				// input for the next rounds.
				fewer = append(fewer, fmt.Sprintf("round %d: %d of %d", r, res.Fewer, windows))
				if r < rounds {
					more := int64(float64(res.Fewer+1) * res.Total.rate())
					e.Logf("K1: %d windows did not fit in %d records: adding %d", res.Fewer, k.n, more)
					if _, err := k.fill(more); err != nil {
						return fmt.Errorf("fill %s: %w", k1In, err)
					}
				}
			}
			return nil
		}
		floorsRun := func() error {
			e.Logf("K1 round %d: franz-go floors", r)
			cpc, ppc, err := floorsOnce(r)
			floor = k1Combined(cpc, ppc)
			return err
		}
		steps := []func() error{floorsRun, jobOnce}
		if r%2 == 0 {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return fmt.Errorf("round %d: %w", r, err)
			}
		}
		if floor > 0 && job > 0 {
			roundRatios = append(roundRatios, job/floor)
		}
	}
	if failed > 0 {
		e.Problem("%.0f checkpoints failed while measuring", failed)
	}
	if e.Profile {
		e.Logf("K1: profiling an extra job and the floors")
		_, err := k.runJob(c, "profile", time.Second, 0, func() { profileTMs(e, b, c, "kafka", 4*time.Second) })
		if err != nil {
			e.Logf("K1 profile run: %v", err)
		}
		k.profileFloor(b)
	}

	combined := k1Combined(median(cons.perCore), median(txn.perCore))
	wp := b.Add("Weir: kafka-source → map → kafka-sink, exactly-once (JobManager + 2 TaskManagers)", "rec/s/core", true, weir.perCore)
	wp.Against("franz-go consume + txn produce", combined, "rec/s/core")
	wp.With("records_per_s", median(weir.rate))
	wp.With("broker_cpu_us_per_record", median(weir.broker))
	wp.With("checkpoints_per_s", median(ckpts))
	wp.With("whole_job_records_per_s_per_core", median(totPerCore))
	wp.With("whole_job_records_per_s", median(totRate))
	wp.With("whole_job_broker_cpu_us_per_record", median(totBroker))
	b.Add("  Weir wall-clock", "rec/s", true, weir.rate)
	b.Add("  Weir ÷ floor, per core, round by round", "×", true, roundRatios)
	b.Add("  whole job, submit → finished (per core)", "rec/s/core", true, totPerCore)
	fp := b.Add("floor: franz-go consume + transactional produce (CPU per record added)", "rec/s/core", true, []float64{combined})
	fp.With("records_per_s", k1Combined(median(cons.rate), median(txn.rate)))
	for _, f := range []struct {
		label string
		a     *acc
	}{
		{"  franz-go consume, read_committed, the input from its start (harness process)", cons},
		{"  franz-go transactional produce, one commit per second (harness process)", txn},
		{"  franz-go idempotent produce (harness process)", idem},
	} {
		p := b.Add(f.label, "rec/s/core", true, f.a.perCore)
		p.With("records_per_s", median(f.a.rate))
		p.With("broker_cpu_us_per_record", median(f.a.broker))
		b.Add("    wall-clock", "rec/s", true, f.a.rate)
	}
	b.Add("broker (kafka-dev) CPU per record: Weir job", "µs", false, weir.broker)
	b.Add("  broker CPU per record: franz-go consume", "µs", false, cons.broker)
	b.Add("  broker CPU per record: franz-go transactional produce", "µs", false, txn.broker)
	b.Goal("Weir ÷ franz-go floor (consume + transactional produce), records/s/core", wp.Ratio, ">=", 0.7, "")
	b.Note("input: %d records (key i mod %d, 16-byte value i) in %d partitions, filled by an idempotent franz-go producer at %.3gM rec/s (%.3gM rec/s/core of the harness); each round the job reads all of it (starting-offsets: earliest, bounded: latest) into its own output topic, then the output is read with read_committed and every input value found once", k.n, k1Keys, k1Partitions, fill.rate()/1e6, fill.perCore()/1e6)
	if len(fewer) > 0 {
		b.Note("windows left out because the input would have ended in them (a later round, if any, got more input): %s", strings.Join(fewer, ", "))
	}
	b.Note("per core = records into the sink ÷ CPU time of the JobManager and both TaskManagers in the same 1 s window (%d windows × %d interleaved rounds, after %s of warm-up); the broker (bin/kafka-dev, franz-go's kfake, in its own process) is not counted, its CPU per record is reported apart; floors: records ÷ CPU time of the harness process (franz-go defaults, read_committed consumer, 1 s transactions); combined floor = 1 ÷ (1/consume + 1/transactional produce)", windows, rounds, warm)
	return nil
}
