// Package task runs one subtask: a mailbox loop that owns the operator and
// its state, reads input channels, aligns checkpoint barriers, takes
// snapshots and reports them to the JobManager.
package task

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/state"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// Network connects a subtask to its producers and consumers. The
// TaskManager implements it; tests can wire subtasks in one process.
type Network interface {
	Partitions() *exchange.Registry
	OpenChannel(ctx context.Context, ch *weirv1.InputChannelDescriptor, notify func()) (exchange.InputChannel, error)
}

// Responder reports checkpoint outcomes to the JobManager.
type Responder interface {
	Acknowledge(ctx context.Context, req *weirv1.AcknowledgeCheckpointRequest) error
	Decline(ctx context.Context, req *weirv1.DeclineCheckpointRequest) error
}

// Config is what a subtask is built from.
type Config struct {
	Descriptor *weirv1.TaskDeploymentDescriptor
	Operators  *sdk.Registry
	Network    Network
	Responder  Responder
	Metrics    *Metrics
	Logger     *slog.Logger
	// OnRunning is called once the subtask is connected and about to process.
	OnRunning func()
	// QueueCapacity bounds each output subpartition, in buffers.
	QueueCapacity int
	// BatchSize is the number of records per buffer.
	BatchSize int
	// FlushInterval bounds how long a partly filled buffer waits.
	FlushInterval time.Duration
}

// Task is one running subtask attempt.
type Task struct {
	cfg     Config
	desc    *weirv1.TaskDeploymentDescriptor
	attempt *weirv1.ExecutionAttemptID
	log     *slog.Logger
	mailbox *mailbox
	metrics *subtaskMetrics

	// Everything below is owned by the goroutine running Run.
	src       sdk.Source
	op        sdk.Operator
	backend   *state.Heap
	inputs    []exchange.InputChannel
	barriers  *BarrierHandler
	inputNote chan struct{}
	endOfData []bool
	eop       []bool
	writers   []*exchange.RecordWriter
	parts     []*exchange.ResultPartition
	out       *collector
	// endOfInput: no more records will come; the next checkpoint is final.
	endOfInput bool
	// finalCheckpoint is the first checkpoint taken after endOfInput; the
	// subtask finishes once it completed, so sinks have committed.
	finalCheckpoint int64
	// suspended: a source stopped emitting for a synchronous savepoint.
	suspended   bool
	finished    bool
	alignStart  time.Time
	nextChannel int
	lastFlush   time.Time
	restoredID  int64

	asyncCtx context.Context
	async    sync.WaitGroup
}

// New validates the descriptor and builds the subtask; Run starts it.
func New(cfg Config) (*Task, error) {
	d := cfg.Descriptor
	if cfg.QueueCapacity <= 0 {
		cfg.QueueCapacity = 8
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 5 * time.Millisecond
	}
	src, op, err := cfg.Operators.Lookup(d.GetOperator())
	if err != nil {
		return nil, err
	}
	if src != nil && len(d.GetInputs()) > 0 {
		return nil, fmt.Errorf("task: source operator %q cannot have inputs", d.GetOperator())
	}
	if op != nil && len(d.GetInputs()) == 0 {
		return nil, fmt.Errorf("task: operator %q needs an input", d.GetOperator())
	}
	a := d.GetAttempt()
	t := &Task{
		cfg:       cfg,
		desc:      d,
		attempt:   a,
		log:       cfg.Logger.With("job_id", a.GetJobId(), "task", a.GetVertex(), "subtask", a.GetSubtaskIndex(), "attempt", a.GetAttempt()),
		mailbox:   newMailbox(),
		metrics:   cfg.Metrics.forSubtask(a),
		src:       src,
		op:        op,
		inputNote: make(chan struct{}, 1),
	}
	maxP, p, i := int(d.GetMaxParallelism()), int(d.GetParallelism()), int(a.GetSubtaskIndex())
	t.backend = state.NewHeap(maxP, keygroup.RangeFor(maxP, p, i))
	return t, nil
}

// TriggerCheckpoint asks a source subtask to start checkpoint id.
func (t *Task) TriggerCheckpoint(id, timestampMs int64, opts *weirv1.CheckpointOptions) {
	b := &weirv1.CheckpointBarrier{CheckpointId: id, TimestampMs: timestampMs, Options: opts}
	t.mailbox.put(func() error {
		if t.barriers != nil && len(t.inputs) > 0 {
			// Only sources are triggered; a subtask with inputs gets the
			// barrier from them. Decline rather than snapshot out of order.
			t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED_TASK_NOT_READY, "triggered a subtask that has inputs")
			return nil
		}
		if opts.GetType() == weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE && !t.endOfInput {
			// Stop-with-savepoint --drain: the input ends before the
			// barrier, so every operator flushes into the savepoint.
			if err := t.reachEndOfInput(); err != nil {
				return err
			}
		}
		return t.checkpoint(b, time.Now())
	})
}

// NotifyCheckpointComplete tells the subtask checkpoint id is durable.
func (t *Task) NotifyCheckpointComplete(id int64) {
	t.mailbox.put(func() error {
		if l, ok := t.operator().(sdk.CheckpointListener); ok {
			if err := l.NotifyCheckpointComplete(id); err != nil {
				return fmt.Errorf("task: notify checkpoint %d complete: %w", id, err)
			}
		}
		if t.finalCheckpoint != 0 && id >= t.finalCheckpoint {
			t.finished = true
		}
		return nil
	})
}

// NotifyCheckpointAborted tells the subtask checkpoint id will never complete.
func (t *Task) NotifyCheckpointAborted(id int64) {
	t.mailbox.put(func() error {
		if l, ok := t.operator().(sdk.CheckpointListener); ok {
			if err := l.NotifyCheckpointAborted(id); err != nil {
				return fmt.Errorf("task: notify checkpoint %d aborted: %w", id, err)
			}
		}
		if id == t.finalCheckpoint {
			// The next checkpoint becomes the final one; a source stopped
			// for a synchronous savepoint emits again.
			t.finalCheckpoint, t.suspended = 0, false
		}
		return nil
	})
}

func (t *Task) operator() any {
	if t.src != nil {
		return t.src
	}
	return t.op
}

// Run executes the subtask until it finishes (nil), is cancelled through ctx
// (ctx's error) or fails.
func (t *Task) Run(ctx context.Context) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	t.asyncCtx = ctx
	defer func() {
		cancel()
		t.async.Wait()
		t.cleanup()
		t.metrics.release()
	}()
	if err := t.setup(ctx); err != nil {
		return err
	}
	if t.cfg.OnRunning != nil {
		t.cfg.OnRunning()
	}
	t.lastFlush = time.Now()
	var timer *time.Timer
	for !t.finished {
		if err := t.runMail(); err != nil {
			return err
		}
		if t.finished {
			break
		}
		progressed, backoff, err := t.step()
		if err != nil {
			return err
		}
		if progressed {
			if time.Since(t.lastFlush) >= t.cfg.FlushInterval {
				if err := t.flush(); err != nil {
					return err
				}
			}
			continue
		}
		// Idle: send what is batched so latency does not wait for a full buffer.
		if err := t.flush(); err != nil {
			return err
		}
		var wake <-chan time.Time
		if backoff > 0 {
			if timer == nil {
				timer = time.NewTimer(backoff)
			} else {
				timer.Reset(backoff)
			}
			wake = timer.C
		}
		select {
		case <-t.mailbox.notify:
		case <-t.inputNote:
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
		if timer != nil && wake != nil && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
	return t.finish()
}

func (t *Task) setup(ctx context.Context) error {
	d := t.desc
	octx := &opContext{t: t}
	for _, o := range d.GetOutputs() {
		id := &weirv1.ResultPartitionID{Producer: t.attempt, ConsumerVertex: o.GetTargetVertex()}
		part := exchange.NewResultPartition(id, int(o.GetNumSubpartitions()), t.cfg.QueueCapacity)
		t.cfg.Network.Partitions().Register(part)
		t.parts = append(t.parts, part)
		t.writers = append(t.writers, exchange.NewRecordWriter(ctx, part, o.GetPartitioner(), int(d.GetMaxParallelism()), int(t.attempt.GetSubtaskIndex()), t.cfg.BatchSize))
	}
	t.out = &collector{writers: t.writers}
	notify := func() {
		select {
		case t.inputNote <- struct{}{}:
		default:
		}
	}
	for _, g := range d.GetInputs() {
		for _, ch := range g.GetChannels() {
			in, err := t.cfg.Network.OpenChannel(ctx, ch, notify)
			if err != nil {
				return fmt.Errorf("task: open input from %s: %w", g.GetSourceVertex(), err)
			}
			t.inputs = append(t.inputs, in)
		}
	}
	t.barriers = NewBarrierHandler(len(t.inputs), d.GetCheckpointOptions().GetExactlyOnce())
	t.endOfData = make([]bool, len(t.inputs))
	t.eop = make([]bool, len(t.inputs))
	if r := d.GetRestore(); r != nil {
		if err := t.backend.Restore(r.GetSubtasks(), int(t.attempt.GetSubtaskIndex()), int(d.GetParallelism())); err != nil {
			return err
		}
		t.restoredID = r.GetCheckpointId()
	}
	var err error
	if t.src != nil {
		err = t.src.Open(octx)
	} else {
		err = t.op.Open(octx)
	}
	if err != nil {
		return fmt.Errorf("task: open operator %s: %w", d.GetOperator(), err)
	}
	return nil
}

func (t *Task) runMail() error {
	for _, m := range t.mailbox.drain() {
		if err := m(); err != nil {
			return err
		}
	}
	return nil
}

// step does one unit of work: one Emit of a source, or one buffer of input.
func (t *Task) step() (progressed bool, backoff time.Duration, err error) {
	if t.src != nil {
		if t.endOfInput || t.suspended {
			return false, 0, nil
		}
		t.out.count = 0
		st, err := t.src.Emit(t.out)
		t.metrics.recordsOut.Add(float64(t.out.count))
		if err == nil {
			err = t.out.err
		}
		if err != nil {
			return false, 0, fmt.Errorf("task: source %s: %w", t.desc.GetOperator(), err)
		}
		if st.EndOfInput {
			return true, 0, t.reachEndOfInput()
		}
		return st.Backoff <= 0, st.Backoff, nil
	}
	n := len(t.inputs)
	for k := 0; k < n; k++ {
		ch := (t.nextChannel + k) % n
		if t.eop[ch] || t.barriers.Blocked(ch) {
			continue
		}
		b, ok, err := t.inputs[ch].Poll()
		if err != nil {
			return false, 0, fmt.Errorf("task: input channel %d: %w", ch, err)
		}
		if !ok {
			continue
		}
		t.nextChannel = (ch + 1) % n
		return true, 0, t.handle(ch, b)
	}
	return false, 0, nil
}

func (t *Task) handle(ch int, b exchange.Buffer) error {
	switch b.Kind {
	case exchange.KindRecords:
		t.out.count = 0
		for _, r := range b.Records {
			t.backend.SetCurrentKey(r.Key)
			if err := t.op.ProcessRecord(r, t.out); err != nil {
				return fmt.Errorf("task: %s: process record: %w", t.desc.GetOperator(), err)
			}
			if t.out.err != nil {
				return t.out.err
			}
		}
		t.metrics.recordsIn.Add(float64(len(b.Records)))
		t.metrics.recordsOut.Add(float64(t.out.count))
		return nil
	case exchange.KindBarrier:
		d, err := t.barriers.OnBarrier(ch, b.Barrier)
		if err != nil {
			return err
		}
		return t.apply(d)
	case exchange.KindCancelMarker:
		d, err := t.barriers.OnCancelMarker(ch, b.CheckpointID)
		if err != nil {
			return err
		}
		return t.apply(d)
	case exchange.KindEndOfData:
		t.endOfData[ch] = true
		return t.maybeEndOfInput()
	case exchange.KindEndOfPartition:
		t.eop[ch] = true
		t.endOfData[ch] = true
		d, err := t.barriers.OnEndOfPartition(ch)
		if err != nil {
			return err
		}
		if err := t.apply(d); err != nil {
			return err
		}
		return t.maybeEndOfInput()
	}
	return fmt.Errorf("task: unexpected %s on channel %d", b.Kind, ch)
}

// apply carries out a barrier handler decision.
func (t *Task) apply(d Decision) error {
	now := time.Now()
	for _, id := range []int64{d.Aborted, d.Cancelled} {
		if id == 0 {
			continue
		}
		t.decline(id, d.AbortReason, "alignment ended without all barriers")
		if err := t.broadcast(exchange.Buffer{Kind: exchange.KindCancelMarker, CheckpointID: id}); err != nil {
			return err
		}
	}
	if d.Started != 0 {
		t.alignStart = now
	}
	if d.Snapshot != nil {
		t.metrics.alignment.Observe(now.Sub(t.alignStart).Seconds())
		return t.checkpoint(d.Snapshot, t.alignStart)
	}
	return nil
}

func (t *Task) maybeEndOfInput() error {
	if t.endOfInput {
		return nil
	}
	for _, e := range t.endOfData {
		if !e {
			return nil
		}
	}
	if e, ok := t.op.(sdk.InputEnder); ok {
		if err := e.EndInput(t.out); err != nil {
			return fmt.Errorf("task: %s: end input: %w", t.desc.GetOperator(), err)
		}
		if t.out.err != nil {
			return t.out.err
		}
	}
	return t.reachEndOfInput()
}

func (t *Task) reachEndOfInput() error {
	t.endOfInput = true
	t.log.Info("end of input reached; finishing after the next completed checkpoint")
	return t.broadcast(exchange.Buffer{Kind: exchange.KindEndOfData})
}

// checkpoint takes the snapshot for barrier b: operators emit what must
// precede the barrier, the barrier goes downstream, the synchronous snapshot
// is taken here and written to storage off the mailbox.
func (t *Task) checkpoint(b *weirv1.CheckpointBarrier, firstBarrier time.Time) error {
	id := b.GetCheckpointId()
	start := time.Now()
	if b.GetTimestampMs() > 0 {
		t.metrics.startDelay.Observe(max(0, firstBarrier.Sub(time.UnixMilli(b.GetTimestampMs())).Seconds()))
	}
	if h, ok := t.operator().(sdk.PreBarrierHook); ok {
		t.out.count = 0
		if err := h.PrepareSnapshotPreBarrier(id, t.out); err != nil {
			return fmt.Errorf("task: prepare snapshot %d: %w", id, err)
		}
		if t.out.err != nil {
			return t.out.err
		}
	}
	if err := t.broadcast(exchange.Buffer{Kind: exchange.KindBarrier, Barrier: b}); err != nil {
		return err
	}
	if s, ok := t.operator().(sdk.Snapshotter); ok {
		if err := s.SnapshotState(id); err != nil {
			t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED, err.Error())
			// Downstream already has the barrier; the marker tells it to
			// stop working on a checkpoint that cannot complete.
			return t.broadcast(exchange.Buffer{Kind: exchange.KindCancelMarker, CheckpointID: id})
		}
	}
	snap := t.backend.Snapshot()
	switch b.GetOptions().GetType() {
	case weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND, weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE:
		// Stop-with-savepoint: nothing more is emitted, and the subtask
		// finishes once the savepoint completed.
		t.finalCheckpoint, t.suspended = id, true
	default:
		if t.endOfInput && t.finalCheckpoint == 0 {
			t.finalCheckpoint = id
		}
	}
	syncDur := time.Since(start)
	alignDur := start.Sub(firstBarrier)
	if len(t.inputs) <= 1 {
		alignDur = 0
	}
	t.metrics.syncDuration.Set(syncDur.Seconds())
	t.async.Add(1)
	go func() {
		defer t.async.Done()
		asyncStart := time.Now()
		dir := storageDir(t.desc, b)
		if _, err := os.Stat(dir); err != nil {
			// The JobManager creates the directory before triggering and
			// removes it on abort: a missing one means the checkpoint is gone.
			t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_ASYNC_EXCEPTION, err.Error())
			return
		}
		st, err := snap.Write(dir, t.attempt.GetVertex(), int(t.attempt.GetSubtaskIndex()), int(t.desc.GetParallelism()))
		if err != nil {
			t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_ASYNC_EXCEPTION, err.Error())
			return
		}
		asyncDur := time.Since(asyncStart)
		t.metrics.asyncDuration.Set(asyncDur.Seconds())
		err = t.cfg.Responder.Acknowledge(t.asyncCtx, &weirv1.AcknowledgeCheckpointRequest{
			Attempt: t.attempt, CheckpointId: id, State: st,
			Metrics: &weirv1.CheckpointMetrics{
				SyncDurationMs:      syncDur.Milliseconds(),
				AsyncDurationMs:     asyncDur.Milliseconds(),
				AlignmentDurationMs: alignDur.Milliseconds(),
			},
		})
		if err != nil && t.asyncCtx.Err() == nil {
			t.log.Warn("acknowledge checkpoint failed", "checkpoint_id", id, "err", err)
		}
	}()
	return nil
}

// storageDir is where the subtask writes its state for barrier b: the
// savepoint's own directory, or the checkpoint's chk-<n>.
func storageDir(d *weirv1.TaskDeploymentDescriptor, b *weirv1.CheckpointBarrier) string {
	if loc := b.GetOptions().GetTargetLocation(); loc != "" {
		return loc
	}
	return storage.Storage{Dir: d.GetCheckpointDir()}.CheckpointDir(d.GetAttempt().GetJobId(), b.GetCheckpointId())
}

func (t *Task) decline(id int64, reason weirv1.CheckpointFailureReason, msg string) {
	t.log.Info("declining checkpoint", "checkpoint_id", id, "reason", reason, "msg", msg)
	t.async.Add(1)
	go func() {
		defer t.async.Done()
		err := t.cfg.Responder.Decline(t.asyncCtx, &weirv1.DeclineCheckpointRequest{
			Attempt: t.attempt, CheckpointId: id, Reason: reason, Message: msg,
		})
		if err != nil && t.asyncCtx.Err() == nil {
			t.log.Warn("decline checkpoint failed", "checkpoint_id", id, "err", err)
		}
	}()
}

func (t *Task) broadcast(b exchange.Buffer) error {
	for _, w := range t.writers {
		if err := w.Broadcast(b); err != nil {
			return err
		}
	}
	t.lastFlush = time.Now()
	return nil
}

func (t *Task) flush() error {
	var blocked time.Duration
	for _, w := range t.writers {
		if err := w.Flush(); err != nil {
			return err
		}
		blocked += w.Backpressured
		w.Backpressured = 0
	}
	if blocked > 0 {
		t.metrics.backpressured.Add(blocked.Seconds())
	}
	t.lastFlush = time.Now()
	return nil
}

// finish ends a subtask whose final checkpoint completed.
func (t *Task) finish() error {
	if err := t.broadcast(exchange.Buffer{Kind: exchange.KindEndOfPartition}); err != nil {
		return err
	}
	t.log.Info("subtask finished")
	return nil
}

func (t *Task) cleanup() {
	var err error
	if t.src != nil {
		err = t.src.Close()
	} else if t.op != nil {
		err = t.op.Close()
	}
	if err != nil {
		t.log.Warn("closing operator failed", "err", err)
	}
	for _, in := range t.inputs {
		in.Close()
	}
	// A finished subtask's consumers may still be reading its last buffers
	// through the subpartition they hold; only the registry entry goes.
	for _, p := range t.parts {
		if t.finished {
			t.cfg.Network.Partitions().Forget(p.ID)
		} else {
			t.cfg.Network.Partitions().Release(p.ID)
		}
	}
}

// collector fans an operator's output out to every output edge.
type collector struct {
	writers []*exchange.RecordWriter
	count   int
	err     error
}

func (c *collector) Collect(r sdk.Record) {
	if c.err != nil {
		return
	}
	c.count++
	for _, w := range c.writers {
		if err := w.Emit(r); err != nil {
			c.err = err
			return
		}
	}
}

// opContext is the sdk.Context of a subtask.
type opContext struct{ t *Task }

func (c *opContext) JobID() string               { return c.t.attempt.GetJobId() }
func (c *opContext) TaskName() string            { return c.t.attempt.GetVertex() }
func (c *opContext) SubtaskIndex() int           { return int(c.t.attempt.GetSubtaskIndex()) }
func (c *opContext) Parallelism() int            { return int(c.t.desc.GetParallelism()) }
func (c *opContext) AttemptNumber() int          { return int(c.t.attempt.GetAttempt()) }
func (c *opContext) Logger() *slog.Logger        { return c.t.log }
func (c *opContext) RestoredCheckpointID() int64 { return c.t.restoredID }
func (c *opContext) Config() sdk.Config {
	return sdk.Config(c.t.desc.GetConfig().AsMap())
}
func (c *opContext) ValueState(name string) sdk.ValueState { return c.t.backend.ValueState(name) }
func (c *opContext) ListState(name string) sdk.ListState   { return c.t.backend.ListState(name, false) }
func (c *opContext) UnionListState(name string) sdk.ListState {
	return c.t.backend.ListState(name, true)
}
