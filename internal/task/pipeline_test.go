package task_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/internal/operators/all"
	"github.com/weirproject/weir/internal/storage"
	"github.com/weirproject/weir/internal/task"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
	"github.com/weirproject/weir/sdk"
)

// This file runs whole jobs in one process: real subtasks (task.Task with
// their mailbox loops), real exchange queues between them (local, or remote
// over a loopback gRPC DataExchange), the built-in running-sum operators,
// and a small stand-in for the JobManager's checkpoint coordinator. A slow
// pass-through operator (test only) creates back-pressure.

// slowOperator forwards records after simulating delay of work per record.
type slowOperator struct{ delay time.Duration }

func (s *slowOperator) Open(ctx sdk.Context) error {
	var err error
	s.delay, err = ctx.Config().Duration("delay", 0)
	return err
}

func (s *slowOperator) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	if s.delay > 0 {
		time.Sleep(s.delay) // the work this operator stands for
	}
	out.Collect(r)
	return nil
}

func (s *slowOperator) Close() error { return nil }

// vertex is one vertex of a test job.
type vertex struct {
	name, operator string
	parallelism    int
	from           []string // upstream vertices, none for a source
	partitioner    weirv1.Partitioner
	config         map[string]any
	// watermarks is a source's watermark strategy; output the side
	// output of the upstream vertices this vertex reads.
	watermarks *weirv1.WatermarkStrategy
	output     string
}

// runningSumJob is the running-sum job with a slow stage before the sink:
// source -hash-> sum -forward-> slow -forward-> sink.
func runningSumJob(count, keys int, delay time.Duration, out string) []vertex {
	return []vertex{
		{name: "source", operator: "sequence-source", parallelism: 2, config: map[string]any{"count": count, "keys": keys}},
		{name: "sum", operator: "keyed-sum", parallelism: 2, from: []string{"source"}, partitioner: weirv1.Partitioner_PARTITIONER_HASH},
		{name: "slow", operator: "slow", parallelism: 2, from: []string{"sum"}, partitioner: weirv1.Partitioner_PARTITIONER_FORWARD, config: map[string]any{"delay": delay.String()}},
		{name: "sink", operator: "file-sink", parallelism: 2, from: []string{"slow"}, partitioner: weirv1.Partitioner_PARTITIONER_FORWARD, config: map[string]any{"path": out}},
	}
}

// ckptResult is what the stand-in coordinator learned about a checkpoint.
type ckptResult struct {
	id        int64
	completed bool
	declined  string
	duration  time.Duration // trigger to last ack
	// Maxima over the subtasks' acknowledgements.
	alignment, startDelay time.Duration
	persisted             int64
	unaligned             int // acks that say unaligned
	final                 bool
	states                map[string][]*weirv1.SubtaskState
}

type pendingCkpt struct {
	id      int64
	start   time.Time
	acks    map[string]*weirv1.AcknowledgeCheckpointRequest
	settled chan ckptResult
}

// job runs every subtask of a job and plays the checkpoint coordinator.
type job struct {
	t        *testing.T
	vertices []vertex
	attempt  int32
	dir      string
	reg      *exchange.Registry
	metrics  *prometheus.Registry
	conn     *grpc.ClientConn // nil: local channels
	cfg      task.Config

	tasks  map[string][]*task.Task
	total  int
	runs   int // goroutines: chain heads and unchained subtasks
	cancel context.CancelFunc
	done   chan error // one per subtask
	failed chan error // the subtasks that failed

	mu struct {
		sync.Mutex
		pending map[int64]*pendingCkpt
		closed  bool
	}
}

type jobOptions struct {
	remote   bool
	attempt  int32
	restore  *ckptResult
	capacity int
	batch    int
	// chained runs forward-connected vertices as chains, as the
	// JobManager deploys them by default.
	chained bool
}

func startJob(t *testing.T, vertices []vertex, dir string, o jobOptions) *job {
	t.Helper()
	j := &job{
		t: t, vertices: vertices, attempt: max(o.attempt, 1), dir: dir, reg: exchange.NewRegistry(), metrics: prometheus.NewRegistry(),
		tasks: map[string][]*task.Task{}, done: make(chan error, 64), failed: make(chan error, 64),
	}
	j.mu.pending = map[int64]*pendingCkpt{}
	if o.remote {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		weirv1grpc.RegisterDataExchangeServiceServer(srv, &exchange.Server{Partitions: j.reg})
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = srv.Serve(lis)
		}()
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		j.conn = conn
		t.Cleanup(func() {
			_ = conn.Close()
			srv.Stop()
			<-served
		})
	}
	ops := sdk.NewRegistry()
	all.Register(ops)
	ops.RegisterOperator("slow", func() sdk.Operator { return &slowOperator{} })
	ops.RegisterSource("shuffled-source", func() sdk.Source { return &shuffledSource{} })
	j.cfg = task.Config{
		Operators: ops, Network: j, Responder: j, Metrics: task.NewMetrics(j.metrics),
		Logger: slog.New(slog.DiscardHandler), QueueCapacity: o.capacity, BatchSize: o.batch,
	}
	byName := map[string]vertex{}
	for _, v := range vertices {
		byName[v.name] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	opts := &weirv1.CheckpointOptions{ExactlyOnce: true, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT}
	for _, v := range vertices {
		cfg, err := structpb.NewStruct(v.config)
		if err != nil {
			t.Fatal(err)
		}
		for i := range v.parallelism {
			d := &weirv1.TaskDeploymentDescriptor{
				Attempt:  j.attemptID(v.name, i),
				Operator: v.operator, Config: cfg, Parallelism: int32(v.parallelism), MaxParallelism: 128,
				CheckpointOptions: opts, CheckpointDir: dir, Watermarks: v.watermarks,
			}
			if o.restore != nil {
				d.Restore = &weirv1.TaskRestore{CheckpointId: o.restore.id, Subtasks: o.restore.states[v.name]}
			}
			for _, from := range v.from {
				up := byName[from]
				gate := &weirv1.InputGateDescriptor{SourceVertex: up.name, Partitioner: v.partitioner}
				for p := range up.parallelism {
					sub := int32(i)
					if v.partitioner == weirv1.Partitioner_PARTITIONER_FORWARD {
						if p != i {
							continue
						}
						sub = 0
					}
					gate.Channels = append(gate.Channels, &weirv1.InputChannelDescriptor{
						Partition: &weirv1.ResultPartitionID{Producer: j.attemptID(up.name, p), ConsumerVertex: v.name}, Subpartition: sub,
					})
				}
				d.Inputs = append(d.Inputs, gate)
			}
			for _, c := range vertices {
				if !slices.Contains(c.from, v.name) {
					continue
				}
				n := int32(c.parallelism)
				if c.partitioner == weirv1.Partitioner_PARTITIONER_FORWARD {
					n = 1
				}
				d.Outputs = append(d.Outputs, &weirv1.OutputDescriptor{TargetVertex: c.name, Partitioner: c.partitioner, NumSubpartitions: n, Output: c.output})
			}
			cfg := j.cfg
			cfg.Descriptor = d
			tk, err := task.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			j.tasks[v.name] = append(j.tasks[v.name], tk)
			j.total++
		}
	}
	member := map[*task.Task]bool{}
	if o.chained {
		member = j.chain()
	}
	for _, v := range vertices {
		for _, tk := range j.tasks[v.name] {
			if member[tk] {
				continue
			}
			j.runs++
			go func() {
				err := tk.Run(ctx)
				if err != nil && ctx.Err() == nil {
					j.failed <- err
				}
				j.done <- err
			}()
		}
	}
	t.Cleanup(func() { j.stop() })
	return j
}

func (j *job) attemptID(vertex string, i int) *weirv1.ExecutionAttemptID {
	return &weirv1.ExecutionAttemptID{JobId: "job", Vertex: vertex, SubtaskIndex: int32(i), Attempt: j.attempt}
}

// stop cancels every subtask (a failure, for the job) and waits for them.
func (j *job) stop() {
	j.mu.Lock()
	if j.mu.closed {
		j.mu.Unlock()
		return
	}
	j.mu.closed = true
	j.mu.Unlock()
	j.cancel()
	for range j.runs {
		<-j.done
	}
}

// chain links the subtasks of forward-connected vertices of equal
// parallelism whose upstream has no other consumer, and returns the ones
// chained after another (run by their chain's head).
func (j *job) chain() map[*task.Task]bool {
	member := map[*task.Task]bool{}
	consumers := map[string]int{}
	for _, v := range j.vertices {
		for _, f := range v.from {
			consumers[f]++
		}
	}
	byName := map[string]vertex{}
	for _, v := range j.vertices {
		byName[v.name] = v
	}
	after := map[string]string{}
	for _, v := range j.vertices {
		if len(v.from) == 1 && v.partitioner == weirv1.Partitioner_PARTITIONER_FORWARD && v.output == "" &&
			consumers[v.from[0]] == 1 && byName[v.from[0]].parallelism == v.parallelism {
			after[v.name] = v.from[0]
		}
	}
	for _, v := range j.vertices {
		if _, chained := after[v.name]; chained {
			continue
		}
		for i, head := range j.tasks[v.name] {
			tasks := []*task.Task{head}
			for cur := v.name; ; {
				next := ""
				for down, up := range after {
					if up == cur {
						next = down
					}
				}
				if next == "" {
					break
				}
				tasks = append(tasks, j.tasks[next][i])
				member[j.tasks[next][i]] = true
				cur = next
			}
			if err := task.Chain(tasks); err != nil {
				j.t.Fatal(err)
			}
		}
	}
	return member
}

// Partitions implements task.Network.
func (j *job) Partitions() *exchange.Registry { return j.reg }

// OpenChannel implements task.Network.
func (j *job) OpenChannel(ctx context.Context, ch *weirv1.InputChannelDescriptor, notify func()) (exchange.InputChannel, error) {
	if j.conn != nil {
		return exchange.NewRemoteChannel(ctx, j.conn, ch.GetPartition(), int(ch.GetSubpartition()), 2, notify)
	}
	p, err := j.reg.Lookup(ctx, ch.GetPartition())
	if err != nil {
		return nil, err
	}
	return exchange.NewLocalChannel(p.Subs[ch.GetSubpartition()], notify), nil
}

func ackKey(a *weirv1.ExecutionAttemptID) string {
	return fmt.Sprintf("%s/%d", a.GetVertex(), a.GetSubtaskIndex())
}

// Acknowledge implements task.Responder: the checkpoint completes when
// every subtask acknowledged it, and every subtask is notified.
func (j *job) Acknowledge(_ context.Context, req *weirv1.AcknowledgeCheckpointRequest) error {
	j.mu.Lock()
	p := j.mu.pending[req.GetCheckpointId()]
	if p == nil {
		j.mu.Unlock()
		return nil
	}
	p.acks[ackKey(req.GetAttempt())] = req
	if len(p.acks) < j.total {
		j.mu.Unlock()
		return nil
	}
	delete(j.mu.pending, p.id)
	j.mu.Unlock()
	res := ckptResult{id: p.id, completed: true, duration: time.Since(p.start), final: true, states: map[string][]*weirv1.SubtaskState{}}
	for _, a := range p.acks {
		m := a.GetMetrics()
		res.alignment = max(res.alignment, time.Duration(m.GetAlignmentDurationMs())*time.Millisecond)
		res.startDelay = max(res.startDelay, time.Duration(m.GetStartDelayMs())*time.Millisecond)
		res.persisted += m.GetBytesPersistedDuringAlignment()
		if m.GetUnaligned() {
			res.unaligned++
		}
		res.final = res.final && a.GetEndOfInput()
		v := a.GetAttempt().GetVertex()
		res.states[v] = append(res.states[v], a.GetState())
	}
	for _, ts := range j.tasks {
		for _, tk := range ts {
			tk.NotifyCheckpointComplete(p.id, res.final)
		}
	}
	p.settled <- res
	return nil
}

// Decline implements task.Responder: the checkpoint is aborted.
func (j *job) Decline(_ context.Context, req *weirv1.DeclineCheckpointRequest) error {
	j.abort(req.GetCheckpointId(), req.GetReason().String()+": "+req.GetMessage())
	return nil
}

func (j *job) abort(id int64, reason string) {
	j.mu.Lock()
	p := j.mu.pending[id]
	delete(j.mu.pending, id)
	j.mu.Unlock()
	if p == nil {
		return
	}
	for _, ts := range j.tasks {
		for _, tk := range ts {
			tk.NotifyCheckpointAborted(id)
		}
	}
	p.settled <- ckptResult{id: id, declined: reason, duration: time.Since(p.start)}
}

// checkpoint triggers checkpoint id at the sources and waits until it
// completes, is declined, or expires after timeout (then it is aborted).
func (j *job) checkpoint(id int64, opts *weirv1.CheckpointOptions, timeout time.Duration) ckptResult {
	j.t.Helper()
	if _, err := (storage.Storage{Dir: j.dir}).InitLocation("job", id); err != nil {
		j.t.Fatal(err)
	}
	p := &pendingCkpt{id: id, start: time.Now(), acks: map[string]*weirv1.AcknowledgeCheckpointRequest{}, settled: make(chan ckptResult, 1)}
	j.mu.Lock()
	j.mu.pending[id] = p
	j.mu.Unlock()
	for _, v := range j.vertices {
		if len(v.from) > 0 {
			continue
		}
		for _, tk := range j.tasks[v.name] {
			tk.TriggerCheckpoint(id, p.start.UnixMilli(), opts)
		}
	}
	expire := time.NewTimer(timeout)
	defer expire.Stop()
	select {
	case r := <-p.settled:
		return r
	case <-expire.C:
		j.mu.Lock()
		if p := j.mu.pending[id]; p != nil {
			var got []string
			for k := range p.acks {
				got = append(got, k)
			}
			j.t.Logf("checkpoint %d expired with acks from %v", id, got)
		}
		j.mu.Unlock()
		j.abort(id, "CHECKPOINT_EXPIRED")
		return <-p.settled
	case err := <-j.failed:
		j.t.Fatalf("a subtask failed during checkpoint %d: %v", id, err)
	}
	return ckptResult{}
}

// finish takes checkpoints every interval until the job's final one
// completed and every subtask finished.
func (j *job) finish(first int64, opts *weirv1.CheckpointOptions, deadline time.Duration) int64 {
	j.t.Helper()
	end := time.Now().Add(deadline)
	id := first
	for ; ; id++ {
		if time.Now().After(end) {
			j.t.Fatalf("job did not finish within %v", deadline)
		}
		if r := j.checkpoint(id, opts, 10*time.Second); r.final {
			break
		}
	}
	j.awaitDone()
	return id
}

// awaitDone waits for every subtask to end after the final checkpoint.
func (j *job) awaitDone() {
	j.t.Helper()
	for range j.runs {
		if err := <-j.done; err != nil {
			j.t.Fatalf("subtask failed: %v", err)
		}
	}
	j.mu.Lock()
	j.mu.closed = true
	j.mu.Unlock()
}

func (j *job) backPressured(vertex string) time.Duration {
	var d time.Duration
	for _, tk := range j.tasks[vertex] {
		d += tk.BackPressured()
	}
	return d
}

func checkpointOptions(mode string, timeout time.Duration) *weirv1.CheckpointOptions {
	o := &weirv1.CheckpointOptions{ExactlyOnce: true, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT}
	switch mode {
	case "unaligned":
		o.Unaligned = true
	case "aligned-timeout":
		o.Unaligned, o.AlignedCheckpointTimeoutMs = true, timeout.Milliseconds()
	}
	return o
}

func sortedLines(t *testing.T, lines []string) []string {
	t.Helper()
	out := slices.Clone(lines)
	slices.Sort(out)
	return out
}

// metric sums the values of the named counter over the subtasks of vertex.
func (j *job) metric(name, vertex string) float64 {
	j.t.Helper()
	families, err := j.metrics.Gather()
	if err != nil {
		j.t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "task_name" && l.GetValue() == vertex {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}
