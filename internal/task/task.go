// Package task runs one subtask: a mailbox loop that owns the operator and
// its state, reads input channels, aligns checkpoint barriers, takes
// snapshots and reports them to the JobManager.
package task

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/internal/fault"
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
	// StateDir is where an embedded state backend keeps its local files
	// (the TaskManager's working directory); os.TempDir when empty.
	StateDir string
	// InlineThreshold is state.Config.InlineThreshold (0: every handle is
	// a file).
	InlineThreshold int
	// LocalRecovery keeps a local copy of the newest completed
	// incremental snapshot under StateDir, read first by a restore of
	// the same subtask on this TaskManager (state.LocalRecoveryDir).
	LocalRecovery bool
	// OnRunning is called once the subtask is connected and about to process.
	OnRunning func()
	// OnEndOfInput is called once the subtask received all its input.
	OnEndOfInput func()
	// QueueCapacity is the number of buffers an output subpartition holds
	// before the subtask stops taking new work (reading input, emitting
	// from a source) until its consumer took one.
	QueueCapacity int
	// Overdraft is how many buffers past QueueCapacity the work already
	// started may add before a write blocks the mailbox [2].
	Overdraft int
	// BatchSize is the number of records per buffer.
	BatchSize int
	// StepRecords bounds the records processed between two looks at the
	// mailbox and at priority events (unaligned barriers) [16].
	StepRecords int
	// FlushInterval bounds how long a partly filled buffer waits.
	FlushInterval time.Duration
	// Now is the clock; time.Now when nil. Tests drive a fake one.
	Now func() time.Time
	// FS is the file system state goes through: the embedded state
	// backend's files and checkpoint storage (the operating system's
	// when nil). Tests inject disk errors with it.
	FS vfs.FS
}

// Task is one running subtask attempt.
type Task struct {
	cfg     Config
	desc    *weirv1.TaskDeploymentDescriptor
	attempt *weirv1.ExecutionAttemptID
	log     *slog.Logger
	mailbox *mailbox
	metrics *subtaskMetrics

	now func() time.Time
	// backpressured is the total time the subtask was back-pressured, in
	// nanoseconds, readable from any goroutine.
	backpressured atomic.Int64

	// Everything below is owned by the goroutine running Run.
	src       sdk.Source
	op        sdk.Operator
	backend   state.Backend
	inputs    []exchange.InputChannel
	barriers  *BarrierHandler
	inputNote chan struct{}
	// outputNote wakes the loop when an output subpartition has space.
	outputNote chan struct{}
	endOfData  []bool
	eop        []bool
	// gate and gateIndex place each input channel in the descriptor.
	gate, gateIndex []int
	writers         []*exchange.RecordWriter
	parts           []*exchange.ResultPartition
	// out is the main output; side the named side outputs that
	// downstream vertices read.
	out  *collector
	side map[string]*sideCollector
	// et is the subtask's event time: watermarks and timers.
	et eventTime
	// srcOut is the output a source emits through.
	srcOut sourceOutput
	// cur is the input buffer being processed, StepRecords at a time.
	cur struct {
		ch   int
		recs []sdk.Record
	}
	// replay holds, per input channel, the restored input channel state,
	// processed before anything the channel delivers.
	replay [][]exchange.Buffer
	// align measures the checkpoint whose barriers are arriving.
	align struct {
		start     time.Time
		processed int64 // bytes processed since the first barrier
	}
	// rec is the channel state of the unaligned checkpoint whose
	// barriers are still arriving.
	rec *channelRecorder
	// outTO is the aligned-timeout checkpoint whose barrier may still wait
	// in an output queue.
	outTO *outputTimeout
	// bpSince is when the output became unavailable; zero when it is.
	bpSince time.Time
	// backoffUntil is when a source that asked to back off wants to emit
	// again.
	backoffUntil time.Time
	// endOfInput: no more records will come; acks say so, and the job's
	// final checkpoint is one every subtask took after its end of input.
	endOfInput bool
	// syncSavepoint is the stop-with-savepoint in progress, if any; the
	// subtask finishes once it completed, so sinks have committed.
	syncSavepoint int64
	// suspended: a source stopped emitting for a synchronous savepoint.
	suspended   bool
	finished    bool
	nextChannel int
	lastFlush   time.Time
	restoredID  int64

	asyncCtx context.Context
	async    sync.WaitGroup
	// progress is read by the heartbeat; it has its own lock.
	progress progress
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
	if cfg.Overdraft <= 0 {
		cfg.Overdraft = 2
	}
	if cfg.StepRecords <= 0 {
		cfg.StepRecords = 16
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
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
		cfg:        cfg,
		desc:       d,
		attempt:    a,
		log:        cfg.Logger.With("job_id", a.GetJobId(), "task", a.GetVertex(), "subtask", a.GetSubtaskIndex(), "attempt", a.GetAttempt()),
		mailbox:    newMailbox(),
		metrics:    cfg.Metrics.forSubtask(a),
		now:        cfg.Now,
		src:        src,
		op:         op,
		inputNote:  make(chan struct{}, 1),
		outputNote: make(chan struct{}, 1),
	}
	t.srcOut.t = t
	maxP, p, i := int(d.GetMaxParallelism()), int(d.GetParallelism()), int(a.GetSubtaskIndex())
	sb := d.GetStateBackend()
	t.backend, err = state.New(state.Config{
		Kind:            sb.GetBackend(),
		Incremental:     sb.GetIncremental() || d.GetCheckpointOptions().GetIncremental(),
		MaxParallelism:  maxP,
		KeyGroups:       keygroup.RangeFor(maxP, p, i),
		LocalDir:        cfg.StateDir,
		SharedDir:       storage.Storage{Dir: d.GetCheckpointDir()}.SharedDir(a.GetJobId()),
		InlineThreshold: cfg.InlineThreshold,
		FS:              cfg.FS,
		Logger:          t.log,
		LocalRecoveryDir: func() string {
			if !cfg.LocalRecovery {
				return ""
			}
			return state.LocalRecoveryDir(stateDirOf(cfg), a.GetJobId(), a.GetVertex(), int(a.GetSubtaskIndex()))
		}(),
		RestoredCheckpointID: d.GetRestore().GetCheckpointId(),
	})
	if err != nil {
		return nil, fmt.Errorf("task: state backend: %w", err)
	}
	return t, nil
}

// Abandon releases a subtask that was built but will never Run.
func (t *Task) Abandon() {
	if err := t.backend.Close(); err != nil {
		t.log.Warn("closing state backend failed", "err", err)
	}
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
		now := t.now()
		t.observeStartDelay(b, now)
		// A source has nothing to align; with unaligned checkpoints its
		// barrier still overtakes its queued output. (An aligned-timeout
		// barrier goes out aligned: its consumers time it out.)
		mode, _ := ModeOf(opts)
		return t.checkpoint(b, now, now, mode == ModeUnaligned)
	})
}

// BackPressured returns how long the subtask has been back-pressured: its
// output was full, so it took no new input (or its source did not emit),
// or a write blocked. Safe to call from any goroutine.
func (t *Task) BackPressured() time.Duration {
	return time.Duration(t.backpressured.Load())
}

// NotifyCheckpointComplete tells the subtask checkpoint id is durable.
// After the job's final checkpoint (final), the subtask finishes: every
// subtask of the job had reached the end of its input when it snapshotted,
// or it was a stop-with-savepoint. Finishing earlier would stop checkpoints
// for the subtasks still draining (a finished source cannot be triggered).
func (t *Task) NotifyCheckpointComplete(id int64, final bool) {
	t.progress.doneUpTo(id)
	t.mailbox.put(func() error {
		t.backend.NotifyCheckpointComplete(id)
		if l, ok := t.operator().(sdk.CheckpointListener); ok {
			if err := l.NotifyCheckpointComplete(id); err != nil {
				return fmt.Errorf("task: notify checkpoint %d complete: %w", id, err)
			}
		}
		if final {
			t.finished = true
		}
		return nil
	})
}

// NotifyCheckpointAborted tells the subtask checkpoint id will never complete.
func (t *Task) NotifyCheckpointAborted(id int64) {
	t.progress.done(id)
	t.mailbox.put(func() error {
		t.backend.NotifyCheckpointAborted(id)
		if l, ok := t.operator().(sdk.CheckpointListener); ok {
			if err := l.NotifyCheckpointAborted(id); err != nil {
				return fmt.Errorf("task: notify checkpoint %d aborted: %w", id, err)
			}
		}
		if t.outTO != nil && t.outTO.id == id {
			// Nothing to wait for: the acknowledgement would be dropped.
			t.outTO.rec.abort()
			t.outTO = nil
		}
		if id == t.syncSavepoint {
			// The stop-with-savepoint failed: a stopped source emits again.
			t.syncSavepoint, t.suspended = 0, false
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
		t.abortChannelState()
		t.async.Wait()
		t.cleanup()
		t.metrics.release()
	}()
	// Deferred after the cleanup, so it runs first: a panic of the
	// operator, or a failed state backend, ends this subtask alone, with
	// the panic as its failure cause, and the cleanup still runs.
	defer func() {
		if r := recover(); r != nil {
			err = t.panicked(r)
		}
	}()
	if err := t.setup(ctx); err != nil {
		return err
	}
	if t.cfg.OnRunning != nil {
		t.cfg.OnRunning()
	}
	t.lastFlush = t.now()
	t.metrics.load.begin(t.lastFlush)
	var timer *time.Timer
	for !t.finished {
		idle, wait, err := t.cycle()
		if err != nil {
			return err
		}
		if t.finished || !idle {
			continue
		}
		// Nothing to do until mail, input or output space arrives, or the
		// next timer (a source's backoff, an alignment timeout) is due.
		var wake <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			wake = timer.C
		}
		// Waiting with room in the output is Flink's idle time; waiting
		// for room is back-pressure, which markBackpressured accounts.
		waitIdle := t.bpSince.IsZero()
		if waitIdle {
			t.metrics.load.enter(loadIdle, t.now())
		}
		select {
		case <-t.mailbox.notify:
		case <-t.inputNote:
		case <-t.outputNote:
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
		if waitIdle {
			t.metrics.load.leave(t.now())
		}
		if timer != nil && wake != nil {
			timer.Stop()
		}
	}
	return t.finish()
}

// cycle is one turn of the mailbox loop: pending mail, priority events on
// the inputs, due timers, then one step of work if the output has room.
// Mail and priority events are handled even while the output is full, so
// a back-pressured subtask still takes checkpoints. idle means nothing
// more can be done until the loop is woken, or wait passed (if positive).
func (t *Task) cycle() (idle bool, wait time.Duration, err error) {
	if err := t.runMail(); err != nil {
		return false, 0, err
	}
	if t.finished {
		return false, 0, nil
	}
	if err := t.pollPriority(); err != nil {
		return false, 0, err
	}
	now := t.now()
	if dl, ok := t.barriers.Deadline(); ok {
		if !now.Before(dl) {
			if err := t.apply(t.barriers.OnTimer(now), now, nil); err != nil {
				return false, 0, err
			}
		} else {
			wait = dl.Sub(now)
		}
	}
	if o := t.outTO; o != nil {
		switch {
		case !now.Before(o.deadline):
			t.settleOutput(true)
		case !t.holdsBarrier(o.id):
			t.settleOutput(false)
		case wait == 0 || o.deadline.Sub(now) < wait:
			wait = o.deadline.Sub(now)
		}
	}
	if w, ok := t.nextTimeEvent(now); ok && (wait == 0 || w < wait) {
		wait = w
	}
	t.collectBlocked()
	if !t.outputAvailable() {
		if t.src != nil && now.Before(t.backoffUntil) {
			// A source that asked to wait would not emit anyway: a full
			// output does not hold it back until its backoff ends. (Flink
			// counts back-pressure only while a task needs a buffer.)
			t.markBackpressured(now, false)
			if w := t.backoffUntil.Sub(now); wait == 0 || w < wait {
				wait = w
			}
			return true, wait, t.flush(now)
		}
		t.markBackpressured(now, true)
		// Partly filled batches still go to the consumers that have room.
		return true, wait, t.flush(now)
	}
	t.markBackpressured(now, false)
	progressed, backoff, err := t.step()
	if err != nil {
		return false, 0, err
	}
	if progressed {
		if now.Sub(t.lastFlush) >= t.cfg.FlushInterval {
			return false, 0, t.flush(now)
		}
		return false, 0, nil
	}
	// Idle: send what is batched so latency does not wait for a full buffer.
	if backoff > 0 {
		t.backoffUntil = now.Add(backoff)
		if wait == 0 || backoff < wait {
			wait = backoff
		}
		// A source that emits again within the flush interval keeps
		// batching until the interval is up, as a busy one does: flushing
		// at every pause of a rate-limited source sends a message per
		// record and fills the consumers' credit windows.
		if backoff < t.cfg.FlushInterval && now.Sub(t.lastFlush) < t.cfg.FlushInterval {
			return true, wait, nil
		}
	}
	return true, wait, t.flush(now)
}

func (t *Task) setup(ctx context.Context) error {
	d := t.desc
	octx := &opContext{t: t}
	spaceNote := func() {
		select {
		case t.outputNote <- struct{}{}:
		default:
		}
	}
	var restored *weirv1.ChannelStateSnapshot
	if r := d.GetRestore(); r != nil {
		var err error
		if restored, err = state.RestoreChannelState(t.cfg.FS, r.GetSubtasks(), int(t.attempt.GetSubtaskIndex()), int(d.GetParallelism())); err != nil {
			return fmt.Errorf("task: restore checkpoint %d: %w", r.GetCheckpointId(), err)
		}
	}
	for _, o := range d.GetOutputs() {
		id := &weirv1.ResultPartitionID{Producer: t.attempt, ConsumerVertex: o.GetTargetVertex()}
		part := exchange.NewResultPartition(id, int(o.GetNumSubpartitions()), t.cfg.QueueCapacity, t.cfg.Overdraft)
		t.parts = append(t.parts, part)
		w := exchange.NewRecordWriter(ctx, part, o.GetPartitioner(), int(d.GetMaxParallelism()), int(t.attempt.GetSubtaskIndex()), t.cfg.BatchSize)
		w.SetAvailabilityListener(spaceNote)
		t.writers = append(t.writers, w)
	}
	// Recovered output goes into the queues before consumers can attach,
	// ahead of anything this attempt emits.
	if err := t.restoreOutput(restored); err != nil {
		return err
	}
	for _, part := range t.parts {
		t.cfg.Network.Partitions().Register(part)
	}
	t.out = &collector{}
	t.side = map[string]*sideCollector{}
	for i, o := range d.GetOutputs() {
		name := o.GetOutput()
		if name == "" {
			t.out.writers = append(t.out.writers, t.writers[i])
			continue
		}
		sc := t.side[name]
		if sc == nil {
			sc = &sideCollector{main: t.out}
			t.side[name] = sc
		}
		sc.writers = append(sc.writers, t.writers[i])
	}
	notify := func() {
		select {
		case t.inputNote <- struct{}{}:
		default:
		}
	}
	for gi, g := range d.GetInputs() {
		for ci, ch := range g.GetChannels() {
			in, err := t.cfg.Network.OpenChannel(ctx, ch, notify)
			if err != nil {
				return fmt.Errorf("task: open input from %s: %w", g.GetSourceVertex(), err)
			}
			t.inputs = append(t.inputs, in)
			t.gate, t.gateIndex = append(t.gate, gi), append(t.gateIndex, ci)
		}
	}
	mode, timeout := ModeOf(d.GetCheckpointOptions())
	t.barriers = NewBarrierHandler(len(t.inputs), mode, timeout)
	t.endOfData = make([]bool, len(t.inputs))
	t.eop = make([]bool, len(t.inputs))
	if err := t.restoreInput(restored); err != nil {
		return err
	}
	t.setupEventTime()
	if r := d.GetRestore(); r != nil {
		if err := t.backend.Restore(r.GetSubtasks(), int(t.attempt.GetSubtaskIndex()), int(d.GetParallelism())); err != nil {
			return err
		}
		t.restoredID = r.GetCheckpointId()
		if err := t.restoreTimers(); err != nil {
			return err
		}
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

// step does one unit of work: one Emit of a source, or up to StepRecords
// records of input (or one event).
func (t *Task) step() (progressed bool, backoff time.Duration, err error) {
	now := t.now()
	if err := t.fireProcessingTimers(now); err != nil {
		return false, 0, err
	}
	if t.src != nil {
		if t.endOfInput || t.suspended {
			return false, 0, nil
		}
		t.out.count = 0
		t.srcOut.now = now
		st, err := t.src.Emit(&t.srcOut)
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
		if err := t.pollWatermarks(now); err != nil {
			return false, 0, err
		}
		return st.Backoff <= 0, st.Backoff, nil
	}
	if len(t.cur.recs) > 0 {
		return true, 0, t.process()
	}
	// Recovered input state goes first, channel by channel.
	for ch, bufs := range t.replay {
		if len(bufs) == 0 {
			continue
		}
		t.cur.ch, t.cur.recs = ch, bufs[0].Records
		t.replay[ch] = bufs[1:]
		return true, 0, t.process()
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
		if b.Kind == exchange.KindRecords {
			t.cur.ch, t.cur.recs = ch, b.Records
			return true, 0, t.process()
		}
		return true, 0, t.handle(ch, b)
	}
	return false, 0, nil
}

// pollPriority handles the priority events (unaligned barriers) waiting on
// any input channel, blocked or not, ahead of the data queued there. A
// channel still replaying recovered input is left alone: its events come
// after that input.
func (t *Task) pollPriority() error {
	for ch, in := range t.inputs {
		if t.eop[ch] || len(t.replay[ch]) > 0 {
			continue
		}
		for {
			b, ok, err := in.PollPriority()
			if err != nil {
				return fmt.Errorf("task: input channel %d: %w", ch, err)
			}
			if !ok {
				break
			}
			if err := t.handle(ch, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// process runs the next StepRecords records of the current input buffer
// through the operator.
func (t *Task) process() error {
	ch := t.cur.ch
	n := min(len(t.cur.recs), t.cfg.StepRecords)
	recs := t.cur.recs[:n:n]
	t.cur.recs = t.cur.recs[n:]
	if len(t.cur.recs) == 0 {
		t.cur.recs = nil
	}
	// Records read before the channel's barrier of an unaligned
	// checkpoint whose snapshot is taken belong to its channel state.
	if t.rec != nil && t.barriers.Recording(ch) {
		t.rec.addInput(ch, exchange.Buffer{Kind: exchange.KindRecords, Records: recs})
	}
	if t.barriers.Aligning() != 0 {
		t.align.processed += exchange.Buffer{Records: recs}.Size()
	}
	t.out.count = 0
	multi, _ := t.op.(sdk.MultiInputOperator)
	for _, r := range recs {
		t.backend.SetCurrentKey(r.Key)
		t.et.curKey = r.Key
		var err error
		if multi != nil {
			err = multi.ProcessInput(t.gate[ch], r, t.out)
		} else {
			err = t.op.ProcessRecord(r, t.out)
		}
		if err != nil {
			return fmt.Errorf("task: %s: process record: %w", t.desc.GetOperator(), err)
		}
		if t.out.err != nil {
			return t.out.err
		}
	}
	t.metrics.recordsIn.Add(float64(len(recs)))
	t.metrics.recordsOut.Add(float64(t.out.count))
	return nil
}

// handle carries out an event read from input channel ch.
func (t *Task) handle(ch int, b exchange.Buffer) error {
	switch b.Kind {
	case exchange.KindBarrier:
		now := t.now()
		d, err := t.barriers.OnBarrier(ch, b.Barrier, now)
		if err != nil {
			return err
		}
		if d.Started == b.Barrier.GetCheckpointId() {
			t.observeStartDelay(b.Barrier, now)
		}
		return t.apply(d, now, func(rec *channelRecorder) {
			if !b.Priority || rec.id != b.Barrier.GetCheckpointId() {
				return
			}
			// The barrier overtook data of its own channel that is not
			// processed yet: the rest of the buffer being processed, and
			// what the channel held when the barrier reached it. It all
			// precedes the barrier, so it is channel state.
			if t.cur.ch == ch && len(t.cur.recs) > 0 {
				rec.addInput(ch, exchange.Buffer{Kind: exchange.KindRecords, Records: t.cur.recs[:len(t.cur.recs):len(t.cur.recs)]})
			}
			for _, o := range b.Overtaken {
				rec.addInput(ch, o)
			}
		})
	case exchange.KindCancelMarker:
		d, err := t.barriers.OnCancelMarker(ch, b.CheckpointID)
		if err != nil {
			return err
		}
		return t.apply(d, t.now(), nil)
	case exchange.KindWatermark:
		return t.onValve(t.et.valve.OnWatermark(ch, b.Watermark))
	case exchange.KindWatermarkStatus:
		return t.onValve(t.et.valve.OnStatus(ch, b.Idle))
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
		if err := t.apply(d, t.now(), nil); err != nil {
			return err
		}
		if err := t.onValve(t.et.valve.OnEndOfPartition(ch)); err != nil {
			return err
		}
		return t.maybeEndOfInput()
	}
	return fmt.Errorf("task: unexpected %s on channel %d", b.Kind, ch)
}

// apply carries out a barrier handler decision made at now. overtaken, if
// set, is called once the snapshot is taken, with the channel state being
// recorded, so the event's caller can add what the barrier overtook.
func (t *Task) apply(d Decision, now time.Time, overtaken func(*channelRecorder)) error {
	for _, id := range d.AbortedIDs() {
		if id == 0 {
			continue
		}
		if t.rec != nil && t.rec.id == id {
			t.rec.abort()
			t.rec = nil
		}
		t.decline(id, d.AbortReason, "alignment ended without all barriers")
		if err := t.broadcast(exchange.Buffer{Kind: exchange.KindCancelMarker, CheckpointID: id}); err != nil {
			return err
		}
	}
	if d.Started != 0 {
		t.align.start, t.align.processed = now, 0
	}
	if d.Snapshot != nil {
		if d.TimedOut {
			t.log.Info("alignment timed out; checkpoint continues unaligned", "checkpoint_id", d.Snapshot.GetCheckpointId(),
				"alignment", now.Sub(t.align.start))
		}
		if err := t.checkpoint(d.Snapshot, t.align.start, now, d.Unaligned); err != nil {
			return err
		}
	}
	if overtaken != nil && t.rec != nil {
		overtaken(t.rec)
	}
	if t.barriers != nil && t.barriers.Aligning() != 0 {
		id := t.barriers.Aligning()
		received, channels := t.barriers.Arrived()
		t.progress.advance(id, weirv1.CheckpointPhase_CHECKPOINT_PHASE_ALIGNING, received, channels)
	}
	if d.Completed != 0 {
		alignment := now.Sub(t.align.start)
		if len(t.inputs) <= 1 {
			alignment = 0
		}
		t.metrics.alignment.Observe(alignment.Seconds())
		if t.rec != nil && t.rec.id == d.Completed {
			t.rec.finish(alignment, t.align.processed)
			t.rec = nil
		}
	}
	return nil
}

// observeStartDelay records how long barrier b took from its trigger to
// this subtask.
func (t *Task) observeStartDelay(b *weirv1.CheckpointBarrier, arrived time.Time) {
	if b.GetTimestampMs() > 0 {
		t.metrics.startDelay.Observe(max(0, arrived.Sub(time.UnixMilli(b.GetTimestampMs())).Seconds()))
	}
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
	if err := t.endEventTime(); err != nil {
		return err
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
	t.log.Info("end of input reached; finishing after the job's final checkpoint")
	if t.cfg.OnEndOfInput != nil {
		t.cfg.OnEndOfInput()
	}
	// Event time ends with the input, whether or not the source had a
	// watermark strategy: every event-time timer downstream fires before
	// the job's final checkpoint.
	if err := t.emitStatus(false); err != nil {
		return err
	}
	if err := t.emitWatermark(sdk.MaxWatermark); err != nil {
		return err
	}
	if t.src != nil {
		t.et.input = sdk.MaxWatermark
		t.publishWatermarks()
	}
	return t.broadcast(exchange.Buffer{Kind: exchange.KindEndOfData})
}

// ckptStats are the measurements an acknowledgement reports.
type ckptStats struct {
	sync, alignment, startDelay time.Duration
	processed, persisted        int64
	unaligned                   bool
	// endOfInput: the subtask had all its input when it snapshotted.
	endOfInput bool
}

// checkpoint takes the snapshot for barrier b, whose first barrier arrived
// at firstBarrier: operators emit what must precede the barrier, the
// barrier goes downstream (ahead of the queued output when unaligned), the
// synchronous snapshot is taken here and written to storage off the
// mailbox. An unaligned checkpoint's acknowledgement waits for its channel
// state: the output its barrier overtook, recorded now, and the input
// still arriving before the barriers missing on other channels.
func (t *Task) checkpoint(b *weirv1.CheckpointBarrier, firstBarrier, now time.Time, unaligned bool) error {
	id := b.GetCheckpointId()
	start := now
	t.progress.advance(id, weirv1.CheckpointPhase_CHECKPOINT_PHASE_SNAPSHOTTING, 0, 0)
	if h, ok := t.operator().(sdk.PreBarrierHook); ok {
		t.out.count = 0
		if err := h.PrepareSnapshotPreBarrier(id, t.out); err != nil {
			return fmt.Errorf("task: prepare snapshot %d: %w", id, err)
		}
		if t.out.err != nil {
			return t.out.err
		}
	}
	barrier := exchange.Buffer{Kind: exchange.KindBarrier, Barrier: b}
	// An older aligned-timeout barrier still queued goes unaligned now:
	// one waits in the output at a time.
	t.settleOutput(true)
	var rec *channelRecorder
	if unaligned {
		if t.rec != nil { // the handler ends an older one first; never here
			t.rec.abort()
			t.rec = nil
		}
		rec = newChannelRecorder(id, len(t.inputs), len(t.writers))
		rec.unaligned = true
		for i, w := range t.writers {
			overtaken, err := w.BroadcastPriority(barrier)
			if err != nil {
				return err
			}
			for sub, bufs := range overtaken {
				for _, o := range bufs {
					rec.addOutput(i, sub, o)
				}
			}
		}
		t.lastFlush = now
	} else if err := t.broadcast(barrier); err != nil {
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
	snap, err := t.backend.TakeSnapshot(state.SnapshotOptions{
		CheckpointID: id,
		Canonical:    state.IsSavepoint(b.GetOptions().GetType()),
		Full:         b.GetOptions().GetType() == weirv1.CheckpointType_CHECKPOINT_TYPE_FULL_CHECKPOINT,
	})
	if err != nil {
		t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED, err.Error())
		if se := (*state.StoreError)(nil); errors.As(err, &se) {
			// The store is lost: the job fails over to the last checkpoint.
			return fmt.Errorf("task: %s: state backend failed: %w", t.desc.GetOperator(), err)
		}
		return t.broadcast(exchange.Buffer{Kind: exchange.KindCancelMarker, CheckpointID: id})
	}
	switch b.GetOptions().GetType() {
	case weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND, weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE:
		// Stop-with-savepoint: nothing more is emitted, and the subtask
		// finishes once the savepoint completed.
		t.syncSavepoint, t.suspended = id, true
	}
	stats := ckptStats{sync: t.now().Sub(start), unaligned: unaligned, endOfInput: t.endOfInput}
	if b.GetTimestampMs() > 0 {
		stats.startDelay = max(0, firstBarrier.Sub(time.UnixMilli(b.GetTimestampMs())))
	}
	if !unaligned && len(t.inputs) > 1 {
		stats.alignment, stats.processed = start.Sub(firstBarrier), t.align.processed
	}
	t.metrics.syncDuration.Set(stats.sync.Seconds())
	if mode, timeout := t.modeOf(b); rec == nil && mode == ModeAlignedTimeout && len(t.writers) > 0 {
		// The aligned barrier may wait in the output queues no longer than
		// what is left of the timeout; the acknowledgement waits until it
		// left them, or went ahead unaligned with what it overtook.
		rec = newChannelRecorder(id, len(t.inputs), len(t.writers))
		t.outTO = &outputTimeout{id: id, deadline: firstBarrier.Add(timeout), rec: rec, alignment: stats.alignment, processed: stats.processed}
	} else if rec != nil {
		t.metrics.unaligned.Inc()
		if len(t.inputs) == 0 {
			rec.finish(0, 0) // a source has no input to wait for
		} else {
			t.rec = rec
		}
	}
	t.progress.advance(id, weirv1.CheckpointPhase_CHECKPOINT_PHASE_UPLOADING, 0, 0)
	t.async.Add(1)
	go func() {
		defer t.async.Done()
		// No operator code runs here, but a panic (of the backend writing
		// its snapshot) must not take the process down: it declines.
		defer func() {
			if r := recover(); r != nil {
				t.log.Error("asynchronous part of a checkpoint panicked", "checkpoint_id", id, "panic", r, "stack", string(debug.Stack()))
				t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_ASYNC_EXCEPTION, fmt.Sprintf("panic: %v", r))
			}
		}()
		t.completeAsync(b, snap, rec, stats)
	}()
	return nil
}

// completeAsync is the asynchronous part of checkpoint b: it writes the
// state files, waits for the channel state of an unaligned checkpoint and
// writes it too, and acknowledges (or declines on a storage error).
func (t *Task) completeAsync(b *weirv1.CheckpointBarrier, snap state.StateSnapshot, rec *channelRecorder, stats ckptStats) {
	id := b.GetCheckpointId()
	asyncStart := t.now()
	dir := storageDir(t.desc, b)
	if blob.IsLocal(dir) {
		if _, err := os.Stat(blob.LocalPath(dir)); err != nil {
			// The JobManager creates the directory before triggering and
			// removes it on abort: a missing one means the checkpoint is
			// gone. (An object store has no directories: what a late
			// writer puts there, the orphan clean-up deletes.)
			snap.Release()
			t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_ASYNC_EXCEPTION, err.Error())
			return
		}
	}
	vertex, subtask := t.attempt.GetVertex(), int(t.attempt.GetSubtaskIndex())
	st, err := snap.Write(dir, vertex, subtask, int(t.desc.GetParallelism()))
	if err != nil {
		// Writing to checkpoint storage failed (a full disk, an object
		// store that is down): Flink's IO_EXCEPTION.
		t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_IO_EXCEPTION, err.Error())
		return
	}
	if rec != nil {
		select {
		case <-rec.done:
		case <-t.asyncCtx.Done():
			return
		}
		if rec.aborted {
			return // declined by the mailbox, or the subtask stopped
		}
		stats.alignment, stats.processed, stats.persisted, stats.unaligned = rec.alignment, rec.processed, rec.bytes, rec.unaligned
		h, err := state.WriteChannelState(t.cfg.FS, dir, vertex, subtask, rec.snapshot(t.desc), t.cfg.InlineThreshold)
		if err != nil {
			t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_IO_EXCEPTION, err.Error())
			return
		}
		if h != nil {
			st.ChannelState = h
			st.StateSize += h.GetSize()
			st.CheckpointedSize += h.GetSize()
		}
	}
	if err := fault.Point(fault.TaskBeforeAck); err != nil {
		t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_ASYNC_EXCEPTION, err.Error())
		return
	}
	asyncDur := t.now().Sub(asyncStart)
	t.metrics.asyncDuration.Set(asyncDur.Seconds())
	t.metrics.processed.Set(float64(stats.processed))
	t.metrics.persisted.Set(float64(stats.persisted))
	t.progress.done(id)
	err = t.cfg.Responder.Acknowledge(t.asyncCtx, &weirv1.AcknowledgeCheckpointRequest{
		Attempt: t.attempt, CheckpointId: id, State: st, EndOfInput: stats.endOfInput,
		Metrics: &weirv1.CheckpointMetrics{
			SyncDurationMs:                stats.sync.Milliseconds(),
			AsyncDurationMs:               asyncDur.Milliseconds(),
			AlignmentDurationMs:           stats.alignment.Milliseconds(),
			StartDelayMs:                  stats.startDelay.Milliseconds(),
			BytesBufferedDuringAlignment:  stats.processed,
			BytesPersistedDuringAlignment: stats.persisted,
			Unaligned:                     stats.unaligned,
		},
	})
	if err != nil && t.asyncCtx.Err() == nil {
		t.log.Warn("acknowledge checkpoint failed", "checkpoint_id", id, "err", err)
	}
}

// outputTimeout is an aligned-timeout checkpoint whose barrier went out
// aligned and may still wait in an output queue.
type outputTimeout struct {
	id       int64
	deadline time.Time
	rec      *channelRecorder
	// alignment and processed are the snapshot's measurements.
	alignment time.Duration
	processed int64
}

// modeOf is barrier b's mode; b's options, or the subtask's.
func (t *Task) modeOf(b *weirv1.CheckpointBarrier) (Mode, time.Duration) {
	if b.GetOptions() == nil {
		return ModeOf(t.desc.GetCheckpointOptions())
	}
	return ModeOf(b.GetOptions())
}

func (t *Task) holdsBarrier(id int64) bool {
	for _, w := range t.writers {
		if w.HoldsBarrier(id) {
			return true
		}
	}
	return false
}

// settleOutput completes the output state of the aligned-timeout
// checkpoint whose barrier may wait in the output queues: with convert,
// every queue still holding the barrier puts it ahead as an unaligned one
// and the records it overtook become the checkpoint's output state.
func (t *Task) settleOutput(convert bool) {
	o := t.outTO
	if o == nil {
		return
	}
	t.outTO = nil
	if convert {
		for i, w := range t.writers {
			overtaken, held := w.ConvertBarrier(o.id, toUnaligned)
			o.rec.unaligned = o.rec.unaligned || held
			for sub, bufs := range overtaken {
				for _, b := range bufs {
					o.rec.addOutput(i, sub, b)
				}
			}
		}
		if o.rec.unaligned {
			t.metrics.unaligned.Inc()
			t.log.Info("barrier waited in the output longer than the aligned checkpoint timeout; sent ahead unaligned",
				"checkpoint_id", o.id, "persisted_bytes", o.rec.bytes)
		}
	}
	o.rec.finish(o.alignment, o.processed)
}

// abortChannelState gives up the channel state being recorded, if any.
func (t *Task) abortChannelState() {
	if t.rec != nil {
		t.rec.abort()
		t.rec = nil
	}
	if t.outTO != nil {
		t.outTO.rec.abort()
		t.outTO = nil
	}
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
	t.progress.done(id)
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

// broadcast sends an event to every consumer, behind the records emitted
// before it; it never blocks.
func (t *Task) broadcast(b exchange.Buffer) error {
	for _, w := range t.writers {
		if err := w.Broadcast(b); err != nil {
			return err
		}
	}
	t.lastFlush = t.now()
	return nil
}

// flush sends the partly filled batches of every subpartition with room.
func (t *Task) flush(now time.Time) error {
	for _, w := range t.writers {
		if err := w.FlushAvailable(); err != nil {
			return err
		}
	}
	t.lastFlush = now
	return nil
}

// outputAvailable reports whether every output subpartition has room, so
// the subtask may take new work.
func (t *Task) outputAvailable() bool {
	for _, w := range t.writers {
		if !w.Available() {
			return false
		}
	}
	return true
}

// markBackpressured tracks the periods the output is unavailable.
func (t *Task) markBackpressured(now time.Time, bp bool) {
	switch {
	case bp && t.bpSince.IsZero():
		t.bpSince = now
		t.metrics.load.enter(loadBackpressured, now)
	case !bp && !t.bpSince.IsZero():
		t.addBackpressured(now.Sub(t.bpSince))
		t.bpSince = time.Time{}
		t.metrics.load.leave(now)
	}
}

// collectBlocked adds the time writes blocked at a full queue.
func (t *Task) collectBlocked() {
	for _, w := range t.writers {
		if w.Backpressured > 0 {
			t.addBackpressured(w.Backpressured)
			t.metrics.load.addBackpressured(w.Backpressured)
			w.Backpressured = 0
		}
	}
}

func (t *Task) addBackpressured(d time.Duration) {
	t.backpressured.Add(int64(d))
	t.metrics.backpressured.Add(d.Seconds())
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
	// After a failure the operator or the backend may be broken enough to
	// panic again: the rest of the cleanup still runs.
	err := t.safely(func() error {
		if t.src != nil {
			return t.src.Close()
		} else if t.op != nil {
			return t.op.Close()
		}
		return nil
	})
	if err != nil {
		t.log.Warn("closing operator failed", "err", err)
	}
	if err := t.safely(t.backend.Close); err != nil {
		t.log.Warn("closing state backend failed", "err", err)
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

// panicked is the failure of a subtask whose mailbox goroutine panicked
// with r: the state backend's failure, or a panic of the operator (whose
// stack goes to the log).
func (t *Task) panicked(r any) error {
	if se, ok := r.(*state.StoreError); ok {
		return fmt.Errorf("task: %s: state backend failed: %w", t.desc.GetOperator(), se)
	}
	t.log.Error("subtask panicked", "panic", r, "stack", string(debug.Stack()))
	if err, ok := r.(error); ok {
		return fmt.Errorf("task: %s panicked: %w", t.desc.GetOperator(), err)
	}
	return fmt.Errorf("task: %s panicked: %v", t.desc.GetOperator(), r)
}

// safely runs f, turning a panic into its error.
func (t *Task) safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = t.panicked(r)
		}
	}()
	return f()
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

// sideCollector is a named side output; its records count, and its write
// errors fail, like the main output's.
type sideCollector struct {
	main    *collector
	writers []*exchange.RecordWriter
}

func (c *sideCollector) Collect(r sdk.Record) {
	if c.main.err != nil {
		return
	}
	c.main.count++
	for _, w := range c.writers {
		if err := w.Emit(r); err != nil {
			c.main.err = err
			return
		}
	}
}

// discard is a side output no downstream vertex reads.
type discard struct{}

func (discard) Collect(sdk.Record) {}

// stateDirOf is the subtask's local state directory.
func stateDirOf(cfg Config) string {
	if cfg.StateDir == "" {
		return os.TempDir()
	}
	return cfg.StateDir
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
func (c *opContext) MapState(name string) sdk.MapState { return c.t.backend.MapState(name) }
func (c *opContext) TimerService() sdk.TimerService    { return timerService{c.t} }
func (c *opContext) Output(name string) sdk.Collector {
	if sc, ok := c.t.side[name]; ok {
		return sc
	}
	return discard{}
}
func (c *opContext) EmitLate(r sdk.Record) {
	if sc, ok := c.t.side[sdk.LateOutput]; ok {
		sc.Collect(r)
		return
	}
	c.t.metrics.lateDropped.Inc()
	c.t.et.view.lateDropped.Add(1)
}
func (c *opContext) Metrics() sdk.MetricGroup { return c.t.metrics.ops }
func (c *opContext) ReducingState(name string, reduce func(acc, v []byte) []byte) sdk.ReducingState {
	return c.t.backend.ReducingState(name, reduce)
}
