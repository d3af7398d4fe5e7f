package kafka

// The Kafka nemesis: seeded, deterministic, randomized sequences of what
// a job does to its Kafka source and exactly-once sink, and of what goes
// wrong around them, against an in-process kfake broker speaking Kafka 4's
// protocol or Kafka 3.9's. The verdict is a read_committed consumer's:
// every input record in the output once, nothing else, and no restore
// that fails for good.
//
// The job is kafka-source (parallelism p) → forward → kafka-sink
// (parallelism p), driven step by step as the runtime would: records
// appended to the input, sources drained into their sinks, checkpoints
// snapshotted on every subtask and then completed, aborted, or completed
// with notifications lost or late; failures (a crash, or a close) at any
// step, and while restoring; restores from the newest or an older retained
// checkpoint, also at another parallelism; broker errors injected on
// produce, commit and restore; the broker's transaction timeout (the
// nemesis is the broker's timer, on the simulated clock the sinks read);
// runs of aborted checkpoints; the broker restarted on its data directory.
//
// Every decision comes from the seed, and every step waits for its I/O to
// finish before the next is drawn, so a seed replays the same steps, the
// same outcomes and the same verdict: -nemesis.seed=S -nemesis.sequences=1
// replays sequence S. `make test` runs a few hundred sequences;
// `make kafka-nemesis` any number.

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weirproject/weir/internal/freeport"
	"github.com/weirproject/weir/internal/kafka/kafkatest"
	"github.com/weirproject/weir/sdk"
)

var (
	nemesisSequences = flag.Int("nemesis.sequences", 0, "Kafka nemesis sequences to run (0: the short run of make test, or none with -short)")
	nemesisSeed      = flag.Uint64("nemesis.seed", 0, "the first sequence's seed; sequence i runs seed+i")
	nemesisSteps     = flag.Int("nemesis.steps", 40, "steps per sequence before the final drain")
	nemesisProtocol  = flag.String("nemesis.protocol", "", "kafka-4 or kafka-3.9 (default: both)")
)

func nemProtocols() []string {
	if *nemesisProtocol != "" {
		return []string{*nemesisProtocol}
	}
	return []string{"kafka-4", "kafka-3.9"}
}

// The simulated configuration: what the sinks are told, and the broker's
// timer.
const (
	nemTxnTimeout = 60 * time.Second
	nemMaxAge     = 30 * time.Second
	nemRestart    = 2 * time.Second // the restart strategy's delay
	nemRetained   = 3
	nemPartitions = 3
)

func TestKafkaNemesis(t *testing.T) {
	n := *nemesisSequences
	if n == 0 {
		if testing.Short() {
			t.Skip("the nemesis's short run is skipped with -short")
		}
		n = 50 // per protocol
	}
	stats := newNemStats()
	// Sequences wait on the broker far more than they compute: run
	// several at once.
	work := make(chan func())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for f := range work {
				f()
			}
		})
	}
	var mu sync.Mutex
	for _, proto := range nemProtocols() {
		for i := range n {
			seed := *nemesisSeed + uint64(i)
			work <- func() {
				r := runNemesis(t, proto, seed, *nemesisSteps)
				stats.add(r)
				if r.verdict != "" {
					mu.Lock()
					defer mu.Unlock()
					t.Errorf("seed %d (%s): %s\nreplay: go test -tags failpoints ./internal/kafka -run 'TestKafkaNemesis$' -nemesis.protocol=%s -nemesis.seed=%d -nemesis.sequences=1\nsteps:\n%s\ntransaction requests the broker saw:\n%s\nwhat the subtasks logged:\n%s",
						seed, proto, r.verdict, proto, seed, strings.Join(r.trace, "\n"), r.brokerLog(), r.subtaskLog())
				}
			}
		}
	}
	close(work)
	wg.Wait()
	t.Log(stats)
}

// TestKafkaNemesisReplays: a seed's steps, outcomes and verdict are the
// same on every run.
func TestKafkaNemesisReplays(t *testing.T) {
	if testing.Short() {
		t.Skip("with -short")
	}
	for _, seed := range []uint64{7, 11} {
		a := runNemesis(t, "kafka-4", seed, 30)
		b := runNemesis(t, "kafka-4", seed, 30)
		if !slices.Equal(a.trace, b.trace) {
			t.Fatalf("seed %d ran differently:\n%s\n--- and ---\n%s\n\ntransaction requests the broker saw, first run:\n%s\n--- second run:\n%s",
				seed, strings.Join(a.trace, "\n"), strings.Join(b.trace, "\n"), a.brokerLog(), b.brokerLog())
		}
	}
}

// nemResult is one sequence's outcome.
type nemResult struct {
	proto string
	trace []string
	// broker lists the transaction requests the broker saw (EndTxn,
	// InitProducerID), in order: not part of the trace (their timing is
	// not the seed's), but what a failure report needs to tell who ended
	// a transaction.
	broker *txnLog
	// subtasks is what the sources and sinks logged, and what each drain
	// read: also for a failure report only.
	subtasks *txnLog
	faults   map[string]int
	verdict  string // "" when exactly once
	records  int
}

type nemStats struct {
	mu        sync.Mutex
	sequences map[string]int
	failed    map[string]int
	faults    map[string]int
	records   int
}

func newNemStats() *nemStats {
	return &nemStats{sequences: map[string]int{}, failed: map[string]int{}, faults: map[string]int{}}
}

func (s *nemStats) add(r nemResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sequences[r.proto]++
	if r.verdict != "" {
		s.failed[r.proto]++
	}
	for k, v := range r.faults {
		s.faults[k] += v
	}
	s.records += r.records
}

func (s *nemStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis: sequences %v, failed %v, input records %d\nfaults:", s.sequences, s.failed, s.records)
	for _, k := range slices.Sorted(maps.Keys(s.faults)) {
		fmt.Fprintf(&b, " %s=%d", k, s.faults[k])
	}
	return b.String()
}

// nemCheckpoint is a checkpoint the simulated coordinator completed: the
// union state of every source and sink subtask.
type nemCheckpoint struct {
	id           int64
	parallelism  int
	source, sink [][]byte
}

// nemesis is one sequence.
type nemesis struct {
	t     testing.TB
	rng   *rand.Rand
	proto string
	res   *nemResult

	dir      string
	port     int
	cluster  *kfake.Cluster
	addr     string
	input    *kgo.Client
	appended int
	ends     map[int32]int64 // the input's end offset per partition

	now time.Time // the simulated clock the sinks read

	parallelism int
	sources     []*Source
	// outs are the sources' outputs, one each for the source's life: a
	// source keeps the collector of its first Emit (the runtime hands
	// the same one to every Emit), so a drain must pass that one.
	outs  []*sinkCollector
	sinks []*Sink
	up    bool // the subtasks are open

	nextID    int64
	pendingCk *nemCheckpoint  // snapshotted, neither completed nor aborted
	completed []nemCheckpoint // retained, oldest first
	// floor is the newest checkpoint whose transactions may have been
	// committed (notified to a sink, or restored): restoring an older one
	// would write its successors' records again, which no two-phase
	// commit can undo, so the coordinator never does.
	floor int64
	late  []int64 // completions whose notifications are delayed

	// the broker's transaction timer: when the nemesis first saw each
	// open transaction (by transactional ID, producer ID and epoch).
	opened map[string]time.Time
	// armed are the injected broker errors not yet fired; the end of
	// the sequence disarms them.
	armed   []*atomic.Bool
	closing sync.WaitGroup
}

func runNemesis(t testing.TB, proto string, seed uint64, steps int) nemResult {
	n := &nemesis{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x6e656d65736973)), proto: proto,
		res:    &nemResult{proto: proto, faults: map[string]int{}, broker: &txnLog{}, subtasks: &txnLog{}},
		dir:    t.TempDir(),
		port:   nemPort(t),
		ends:   map[int32]int64{},
		now:    time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		opened: map[string]time.Time{},
	}
	defer n.shutdown()
	if err := n.startBroker(); err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	n.parallelism = 1 + n.rng.IntN(3)
	n.verdict(n.run(steps))
	return *n.res
}

// nemPort is a free loopback port for the broker, which keeps it across
// restarts.
func nemPort(t testing.TB) int {
	_, port, _ := strings.Cut(freeport.Addr(t), ":")
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (n *nemesis) verdict(err error) {
	if err != nil && n.res.verdict == "" {
		n.res.verdict = err.Error()
	}
}

func (n *nemesis) log(format string, args ...any) {
	n.res.trace = append(n.res.trace, fmt.Sprintf(format, args...))
}

func (n *nemesis) fault(kind string) {
	n.res.faults[kind]++
}

func (n *nemesis) startBroker() error {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(n.port), kfake.DataDir(n.dir),
		kfake.SeedTopics(nemPartitions, "in", "out")}
	if n.proto == "kafka-3.9" {
		opts = append(opts, kfake.MaxVersions(kversion.V3_9_0()))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	n.cluster, n.addr = c, c.ListenAddrs()[0]
	n.observeTransactions()
	if n.input == nil {
		n.input, err = kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("in"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	return err
}

// observeTransactions records every EndTxn and InitProducerID the broker
// is sent, leaving them to the broker (and to the faults armed after).
func (n *nemesis) observeTransactions() {
	record := n.res.broker.add
	n.cluster.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		n.cluster.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		record(fmt.Sprintf("EndTxn %s pid=%d epoch=%d commit=%t v%d", r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit, r.Version))
		return nil, nil, false
	})
	n.cluster.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		n.cluster.KeepControl()
		r := req.(*kmsg.InitProducerIDRequest)
		id := "<none>"
		if r.TransactionalID != nil {
			id = *r.TransactionalID
		}
		record(fmt.Sprintf("InitProducerID %s pid=%d epoch=%d", id, r.ProducerID, r.ProducerEpoch))
		return nil, nil, false
	})
}

// txnLog is the broker's transaction requests, as the broker's goroutines
// see them.
type txnLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *txnLog) add(line string) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
}

// Write takes one slog line.
func (l *txnLog) Write(p []byte) (int, error) {
	l.add(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *txnLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// brokerLog is what the broker saw, for a failure report.
func (r nemResult) brokerLog() string { return r.broker.String() }

// subtaskLog is what the subtasks logged, for a failure report.
func (r nemResult) subtaskLog() string { return r.subtasks.String() }

func (n *nemesis) shutdown() {
	n.crash()
	n.closing.Wait()
	if n.input != nil {
		n.input.Close()
	}
	if n.cluster != nil {
		n.cluster.Close()
	}
}

func (n *nemesis) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// run draws steps, then ends the job: no more faults, a restore if needed,
// everything drained, a last checkpoint completed and notified.
func (n *nemesis) run(steps int) error {
	if err := n.restore(0, n.parallelism, false); err != nil {
		return err
	}
	for range steps {
		if err := n.step(); err != nil {
			return err
		}
	}
	n.log("end: drain everything, one more checkpoint, every notification")
	for _, a := range n.armed {
		a.Store(true)
	}
	// The end may meet one more failure (a transaction that reached its
	// maximum age, a fault armed and not yet fired): it fails over as
	// any step would, and tries again.
	var err error
	for range 3 {
		if err = n.finish(); err == nil {
			break
		}
		n.log("  the end failed: %v", short(err))
		if err = n.failover("at the end"); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	return n.check()
}

// finish drains every source, then takes a checkpoint and completes it on
// every subtask.
func (n *nemesis) finish() error {
	if !n.up {
		if err := n.failover("restart"); err != nil {
			return err
		}
	}
	for i := range n.sources {
		if err := n.drain(i); err != nil {
			return fmt.Errorf("final drain: %w", err)
		}
	}
	id, err := n.checkpoint()
	if err != nil {
		return fmt.Errorf("final checkpoint: %w", err)
	}
	n.complete(id)
	n.floor = id
	for i := range n.sinks {
		if err := n.sinks[i].NotifyCheckpointComplete(id); err != nil {
			return fmt.Errorf("final commit: %w", err)
		}
	}
	return nil
}

func (n *nemesis) newest() int64 {
	if len(n.completed) == 0 {
		return 0
	}
	return n.completed[len(n.completed)-1].id
}

// step draws one event. A failure of a subtask (an error from a call)
// fails the job over, as the JobManager would.
func (n *nemesis) step() error {
	if !n.up {
		return n.failover("restart")
	}
	var err error
	switch x := n.rng.IntN(100); {
	case x < 20:
		k := 1 + n.rng.IntN(20)
		n.log("append %d", k)
		return n.append(k)
	case x < 40:
		i := n.rng.IntN(len(n.sources))
		n.log("drain source %d", i)
		err = n.drain(i)
	case x < 65:
		err = n.checkpointStep()
	case x < 70:
		err = n.abortRun()
	case x < 76:
		n.fault("crash")
		n.log("crash")
		n.crash()
		return n.failover("after a crash")
	case x < 79:
		n.fault("close")
		n.log("fail and close")
		n.close()
		return n.failover("after a close")
	case x < 83:
		n.fault("rescale")
		p := 1 + n.rng.IntN(3)
		n.log("rescale to %d", p)
		n.close()
		n.parallelism = p
		return n.failover("rescale")
	case x < 88:
		err = n.brokerError()
	case x < 91:
		n.fault("broker-restart")
		n.log("broker restart")
		n.cluster.Close()
		if err := n.startBroker(); err != nil {
			return fmt.Errorf("broker restart: %w", err)
		}
	default:
		if len(n.late) > 0 {
			err = n.deliverLate()
		}
	}
	if err != nil {
		n.log("  subtask failed: %v", short(err))
		n.crash()
		return n.failover("after a subtask failure")
	}
	return nil
}

// short is an error's first line without what varies between runs.
func short(err error) string {
	s := err.Error()
	if i := strings.Index(s, " was opened "); i > 0 {
		s = s[:i]
	}
	return s
}

func (n *nemesis) append(k int) error {
	ctx, cancel := n.ctx()
	defer cancel()
	for range k {
		p := int32(n.appended % nemPartitions)
		v := fmt.Sprintf("r%05d", n.appended)
		if err := n.input.ProduceSync(ctx, &kgo.Record{Partition: p, Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			return fmt.Errorf("append to the input: %w", err)
		}
		n.appended++
		n.ends[p]++
	}
	n.res.records = n.appended
	return nil
}

// sinkCollector hands a source's records to its sink subtask (forward).
type sinkCollector struct {
	s   *Sink
	err error
	n   int
}

func (c *sinkCollector) Collect(r sdk.Record) {
	c.n++
	if c.err == nil {
		c.err = c.s.ProcessRecord(r, nil)
	}
}

// drain emits from source i until it read everything appended so far to
// its partitions: how the fetches split the records varies from run to
// run, what the sink got when drain returns does not. The sink's writes
// are flushed, so a write the broker refused is known before the next
// step.
func (n *nemesis) drain(i int) error {
	src, out := n.sources[i], n.outs[i]
	out.n = 0
	if out.err != nil {
		return out.err
	}
	deadline := time.Now().Add(30 * time.Second)
	defer func() {
		var at []string
		for _, p := range src.order {
			at = append(at, fmt.Sprintf("%s@%d", p.sourceTP, p.next))
		}
		n.res.subtasks.add(fmt.Sprintf("nemesis: drain source %d: %d records into sink %d; positions %v", i, out.n, i, at))
	}()
	for !n.drained(i, src) {
		if time.Now().After(deadline) {
			return fmt.Errorf("source %d did not reach the input's end in 30 s", i)
		}
		st, err := src.Emit(out)
		if err != nil {
			return err
		}
		if out.err != nil {
			return out.err
		}
		if st.Backoff > 0 {
			time.Sleep(min(st.Backoff, time.Millisecond))
		}
	}
	if sk := n.sinks[i]; sk.cur != nil {
		ctx, cancel := n.ctx()
		defer cancel()
		if err := sk.cur.Flush(ctx); err != nil {
			return err
		}
	}
	return n.sinks[i].failed()
}

// drained: source i reads every partition it owns, up to the input's end.
func (n *nemesis) drained(i int, src *Source) bool {
	for p, end := range n.ends {
		if sourceOwner(sourceTP{"in", p}, n.parallelism) != i {
			continue
		}
		if sp := src.parts[sourceTP{"in", p}]; sp == nil || sp.next < end {
			return false
		}
	}
	return true
}

// checkpoint snapshots every subtask, sources first (their positions are
// the barrier's), and returns the checkpoint's ID.
func (n *nemesis) checkpoint() (int64, error) {
	n.nextID++
	id := n.nextID
	n.now = n.now.Add(time.Duration(1+n.rng.IntN(5)) * time.Second)
	ck := nemCheckpoint{id: id, parallelism: n.parallelism}
	for i, src := range n.sources {
		if err := src.SnapshotState(id); err != nil {
			return id, fmt.Errorf("source %d snapshot %d: %w", i, id, err)
		}
		ck.source = append(ck.source, src.state.Get()...)
	}
	for i, s := range n.sinks {
		if err := s.SnapshotState(id); err != nil {
			return id, fmt.Errorf("sink %d snapshot %d: %w", i, id, err)
		}
		ck.sink = append(ck.sink, s.state.Get()...)
	}
	n.pendingCk = &ck
	return id, nil
}

// complete adds the checkpoint just snapshotted to the retained ones.
func (n *nemesis) complete(id int64) {
	if n.pendingCk == nil || n.pendingCk.id != id {
		return
	}
	n.completed = append(n.completed, *n.pendingCk)
	if len(n.completed) > nemRetained {
		n.completed = n.completed[1:]
	}
	n.pendingCk = nil
}

// checkpointStep takes a checkpoint and draws its fate: completed and
// notified, completed with the notification lost or late for some sinks,
// or aborted.
func (n *nemesis) checkpointStep() error {
	id, err := n.checkpoint()
	if err != nil {
		return err
	}
	if err := n.brokerTimer(); err != nil {
		return err
	}
	switch x := n.rng.IntN(100); {
	case x < 65:
		n.log("checkpoint %d completes", id)
		n.complete(id)
		return n.notify(id, func(int) string { return "deliver" })
	case x < 80:
		n.fault("notification-lost-or-late")
		n.complete(id)
		fates := make([]string, len(n.sinks))
		for i := range fates {
			fates[i] = []string{"deliver", "lose", "delay"}[n.rng.IntN(3)]
		}
		n.log("checkpoint %d completes, notifications %v", id, fates)
		if slices.Contains(fates, "delay") {
			n.late = append(n.late, id)
		}
		return n.notify(id, func(i int) string { return fates[i] })
	default:
		n.fault("checkpoint-aborted")
		n.log("checkpoint %d aborted", id)
		return n.abort(id)
	}
}

func (n *nemesis) notify(id int64, fate func(int) string) error {
	for i, s := range n.sinks {
		if fate(i) != "deliver" {
			continue
		}
		n.floor = max(n.floor, id)
		if err := s.NotifyCheckpointComplete(id); err != nil {
			return fmt.Errorf("sink %d commit of %d: %w", i, id, err)
		}
	}
	for i, src := range n.sources {
		if err := src.NotifyCheckpointComplete(id); err != nil {
			return fmt.Errorf("source %d notified of %d: %w", i, id, err)
		}
	}
	return nil
}

func (n *nemesis) abort(id int64) error {
	n.pendingCk = nil
	for i, s := range n.sinks {
		if err := s.NotifyCheckpointAborted(id); err != nil {
			return fmt.Errorf("sink %d told %d aborted: %w", i, id, err)
		}
	}
	return nil
}

// abortRun is a stretch of back-pressure: checkpoints aborted one after
// another while records keep coming, long enough to outlive a
// transaction's timeout if the sink carried its transaction through it.
func (n *nemesis) abortRun() error {
	k := 3 + n.rng.IntN(20)
	n.fault("aborted-run")
	n.log("back-pressure: %d checkpoints aborted in a row", k)
	for range k {
		if err := n.append(1 + n.rng.IntN(3)); err != nil {
			return err
		}
		for i := range n.sources {
			if err := n.drain(i); err != nil {
				return err
			}
		}
		id, err := n.checkpoint()
		if err != nil {
			return err
		}
		if err := n.brokerTimer(); err != nil {
			return err
		}
		if err := n.abort(id); err != nil {
			return err
		}
	}
	return nil
}

// deliverLate delivers a delayed notification, after newer ones.
func (n *nemesis) deliverLate() error {
	id := n.late[0]
	n.late = n.late[1:]
	n.log("late notification of checkpoint %d", id)
	return n.notify(id, func(int) string { return "deliver" })
}

// brokerTimer is the broker's transaction timeout on the simulated clock:
// an open transaction seen for longer than the timeout is aborted, and its
// producer fenced, as a broker does.
func (n *nemesis) brokerTimer() error {
	ctx, cancel := n.ctx()
	defer cancel()
	adm := kadm.NewClient(n.sinkAdmin())
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		return fmt.Errorf("broker timer: %w", err)
	}
	ids := listed.TransactionalIDs()
	slices.Sort(ids)
	if len(ids) == 0 {
		return nil
	}
	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		return fmt.Errorf("broker timer: %w", err)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		d, ok := described[id]
		if !ok || d.Err != nil || d.State != "Ongoing" {
			continue
		}
		key := fmt.Sprintf("%s/%d/%d", id, d.ProducerID, d.ProducerEpoch)
		seen[key] = true
		first, ok := n.opened[key]
		if !ok {
			n.opened[key] = n.now
			continue
		}
		if n.now.Sub(first) < nemTxnTimeout {
			continue
		}
		n.fault("broker-timeout-abort")
		n.log("  broker timeout aborts %s", id)
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(nemTxnTimeout.Milliseconds())
		req.ProducerID, req.ProducerEpoch = d.ProducerID, d.ProducerEpoch
		resp, err := req.RequestWith(ctx, n.sinkAdmin())
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return fmt.Errorf("broker timer: abort %s: %w", id, err)
		}
	}
	for k := range n.opened {
		if !seen[k] {
			delete(n.opened, k)
		}
	}
	return nil
}

// sinkAdmin is a client for the nemesis's own requests: the input's.
func (n *nemesis) sinkAdmin() *kgo.Client { return n.input }

// brokerError arms a broker error for the next request of a kind.
func (n *nemesis) brokerError() error {
	kinds := []string{"produce-refused", "commit-refused", "commit-busy", "fence-refused"}
	kind := kinds[n.rng.IntN(len(kinds))]
	n.fault(kind)
	n.log("broker error armed: %s", kind)
	fired := new(atomic.Bool)
	n.armed = append(n.armed, fired)
	switch kind {
	case "produce-refused":
		n.cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
			r := req.(*kmsg.ProduceRequest)
			if r.TransactionID == nil || fired.Swap(true) {
				return nil, nil, false
			}
			return refuseProduce(r), nil, true
		})
	case "commit-refused", "commit-busy":
		code := kerr.TransactionAbortable.Code
		if kind == "commit-busy" {
			code = kerr.ConcurrentTransactions.Code
		}
		n.cluster.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
			if !req.(*kmsg.EndTxnRequest).Commit || fired.Swap(true) {
				return nil, nil, false
			}
			resp := req.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = code
			return resp, nil, true
		})
	case "fence-refused":
		n.cluster.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
			if fired.Swap(true) {
				return nil, nil, false
			}
			resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp, nil, true
		})
	}
	// The fault fires on the next such request; what it did shows in the
	// next steps. Draining now keeps the produce fault's effect at a
	// fixed step.
	i := n.rng.IntN(len(n.sources))
	if err := n.append(1 + n.rng.IntN(5)); err != nil {
		return err
	}
	return n.drain(i)
}

func refuseProduce(r *kmsg.ProduceRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, kerr.InvalidRecord.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// failover restores the job, as the JobManager would after a failure:
// from the newest completed checkpoint, or sometimes an older retained one
// (never below the floor). A restore that fails is retried; one that
// fails three times without an injected fault fails the verdict.
func (n *nemesis) failover(why string) error {
	n.crash()
	n.late, n.pendingCk = nil, nil
	n.now = n.now.Add(nemRestart)
	from := n.newest()
	var older []int64
	for _, c := range n.completed {
		if c.id >= n.floor && c.id < from {
			older = append(older, c.id)
		}
	}
	if len(older) > 0 && n.rng.IntN(4) == 0 {
		from = older[n.rng.IntN(len(older))]
		n.fault("restore-older")
	}
	n.log("failover (%s): restore checkpoint %d at parallelism %d", why, from, n.parallelism)
	// A failure in the middle of the restore: the subtasks opened so
	// far fail, the restore starts again.
	if n.rng.IntN(5) == 0 {
		n.fault("fail-during-restore")
		stop := n.rng.IntN(n.parallelism + 1)
		n.log("  fails during the restore after %d sinks opened", stop)
		if err := n.restore(from, stop, true); err != nil {
			n.log("  restore failed: %v", short(err))
		}
		n.crash()
		n.now = n.now.Add(nemRestart)
	}
	var err error
	for range 3 {
		if err = n.restore(from, n.parallelism, false); err == nil {
			return nil
		}
		n.log("  restore failed: %v", short(err))
		n.crash()
		n.now = n.now.Add(nemRestart)
	}
	return fmt.Errorf("the job can never restore from checkpoint %d: %w", from, err)
}

// restore opens the sources and the first sinks subtasks (all when not
// partial) from checkpoint id (0: a first start).
func (n *nemesis) restore(id int64, sinks int, partial bool) error {
	var ck nemCheckpoint
	for _, c := range n.completed {
		if c.id == id {
			ck = c
		}
	}
	if id > 0 && ck.id == 0 {
		return fmt.Errorf("checkpoint %d is not retained", id)
	}
	n.floor = max(n.floor, id)
	n.nextID = max(n.nextID, id)
	// Restoring an older checkpoint aborted what the newer ones
	// pre-committed: a coordinator that falls back to an older checkpoint
	// (the newer unreadable) drops the newer ones for good.
	n.completed = slices.DeleteFunc(n.completed, func(c nemCheckpoint) bool { return c.id > id })
	n.opened = map[string]time.Time{} // restarts are quick; the timer goes on below
	for i := range n.parallelism {
		if i < sinks {
			s := &Sink{now: func() time.Time { return n.now }}
			ctx := n.subtaskCtx(i, id, "kafka-sink-transactions", ck.sink, sdk.Config{
				"bootstrap-servers": n.addr, "topic": "out", "transactional-id-prefix": "nem",
				"transaction-timeout": nemTxnTimeout.String(), "transaction-max-age": nemMaxAge.String()})
			n.sinks = append(n.sinks, s)
			if err := s.Open(ctx); err != nil {
				return fmt.Errorf("sink %d open: %w", i, err)
			}
		}
		if partial {
			continue
		}
		src := &Source{}
		ctx := n.subtaskCtx(i, id, sourceStateName, ck.source, sdk.Config{
			"bootstrap-servers": n.addr, "topic": "in", "starting-offsets": "earliest"})
		n.sources = append(n.sources, src)
		n.outs = append(n.outs, &sinkCollector{s: n.sinks[i]})
		if err := src.Open(ctx); err != nil {
			return fmt.Errorf("source %d open: %w", i, err)
		}
	}
	n.up = !partial
	return nil
}

// crash ends every subtask as a killed process would: its clients gone,
// its transactions as they are.
func (n *nemesis) crash() {
	for _, s := range n.sinks {
		if s.timer != nil {
			s.timer.Stop()
		}
		// Their writes were flushed at the end of every step: closing
		// in the background sends nothing the broker did not have.
		n.closing.Go(func() {
			for _, c := range s.producers {
				c.Close()
			}
			if s.admin != nil {
				s.admin.Close()
			}
		})
	}
	n.closeSources()
	n.sinks, n.sources, n.outs, n.up = nil, nil, nil, false
}

// close ends every subtask as a failed one that the runtime closes.
func (n *nemesis) close() {
	for _, s := range n.sinks {
		s.Close()
	}
	n.closeSources()
	n.sinks, n.sources, n.outs, n.up = nil, nil, nil, false
}

// closeSources closes the sources in the background: a consumer's close
// takes most of a second, and what a source does while closing reaches
// no one.
func (n *nemesis) closeSources() {
	for _, src := range n.sources {
		n.closing.Go(func() { src.Close() })
	}
}

// check is the verdict: the output read read_committed holds every input
// record once and nothing else.
func (n *nemesis) check() error {
	ctx, cancel := n.ctx()
	defer cancel()
	recs, err := kafkatest.ReadCommitted(ctx, "out", kgo.SeedBrokers(n.addr))
	if err != nil {
		return fmt.Errorf("read the output: %w", err)
	}
	count := map[string]int{}
	for _, r := range recs {
		count[string(r.Value)]++
	}
	var lost, dup []string
	for i := range n.appended {
		v := fmt.Sprintf("r%05d", i)
		switch c := count[v]; {
		case c == 0:
			lost = append(lost, v)
		case c > 1:
			dup = append(dup, fmt.Sprintf("%s×%d", v, c))
		}
		delete(count, v)
	}
	n.log("verdict: %d input records, %d output records, %d lost, %d duplicated, %d foreign", n.appended, len(recs), len(lost), len(dup), len(count))
	if len(lost)+len(dup)+len(count) > 0 {
		return fmt.Errorf("not exactly once: lost %s; duplicated %s; foreign %d", head(lost), head(dup), len(count))
	}
	return nil
}

func head(s []string) string {
	if len(s) > 8 {
		return fmt.Sprintf("%v… (%d)", s[:8], len(s))
	}
	return fmt.Sprint(s)
}

// nemCtx is the sdk.Context of one subtask, with its union list state in
// memory.
type nemCtx struct {
	sdk.Context // nil: only what the connectors call is implemented
	log         *slog.Logger
	cfg         sdk.Config
	name        string
	subtask     int
	parallelism int
	restored    int64
	lists       map[string]*memList
}

func (n *nemesis) subtaskCtx(subtask int, restored int64, state string, items [][]byte, cfg sdk.Config) *nemCtx {
	name := "sink"
	if state == sourceStateName {
		name = "source"
	}
	c := &nemCtx{cfg: cfg, name: name, subtask: subtask, parallelism: n.parallelism, restored: restored, lists: map[string]*memList{},
		// Debug: the Kafka clients' transactions (began, ended, producer
		// IDs), so a failing sequence shows what each producer did.
		log: slog.New(slog.NewTextHandler(n.res.subtasks, &slog.HandlerOptions{Level: slog.LevelDebug})).With("subtask", fmt.Sprintf("%s-%d", name, subtask))}
	c.lists[state] = &memList{items: slices.Clone(items)}
	return c
}

func (c *nemCtx) ReportPending(sdk.Pending) {}

func (c *nemCtx) Config() sdk.Config          { return c.cfg }
func (c *nemCtx) TaskName() string            { return c.name }
func (c *nemCtx) SubtaskIndex() int           { return c.subtask }
func (c *nemCtx) Parallelism() int            { return c.parallelism }
func (c *nemCtx) RestoredCheckpointID() int64 { return c.restored }
func (c *nemCtx) Metrics() sdk.MetricGroup    { return sdk.DiscardMetrics }
func (c *nemCtx) Logger() *slog.Logger        { return c.log }
func (c *nemCtx) UnionListState(name string) sdk.ListState {
	if c.lists[name] == nil {
		c.lists[name] = &memList{}
	}
	return c.lists[name]
}
