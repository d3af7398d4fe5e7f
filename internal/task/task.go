// Package task runs one subtask: a mailbox loop that owns the operator and
// its state, reads input channels, aligns checkpoint barriers, takes
// snapshots and reports them to the JobManager.
package task

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/internal/barrier"
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
	// StateDir is where an embedded state backend keeps its local files
	// (the TaskManager's working directory); os.TempDir when empty.
	StateDir string
	// InlineThreshold is state.Config.InlineThreshold (0: every handle is
	// a file).
	InlineThreshold int
	// LocalRecovery keeps a local copy of the newest completed
	// incremental snapshot under StateDir, read first by a restore on
	// this TaskManager of the same subtask, or of one rescaled to take
	// over its key groups (state.LocalRecoveryDir).
	LocalRecovery bool
	// StateCacheBytes is state.Config.CacheBytes: the Pebble backend's
	// write-back cache (the default when 0, none when negative).
	StateCacheBytes int
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
	// FlushInterval bounds how long a partly filled buffer waits
	// (DefaultBufferTimeout when 0); the job's buffer-timeout overrides
	// it.
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
	// backlog is the source's last sdk.Backlog, read by the TaskManager's
	// heartbeats.
	backlog atomic.Uint32
	// pendingRecords and splits are what the source reported last
	// (sdk.Context.ReportPending; pendingRecords -1 until it does), read
	// the same way.
	pendingRecords atomic.Int64
	splits         atomic.Int32
	metrics        *subtaskMetrics

	now func() time.Time
	// backpressured is the total time the subtask was back-pressured, in
	// nanoseconds, readable from any goroutine.
	backpressured atomic.Int64

	// Everything below is owned by the goroutine running Run.
	src     sdk.Source
	op      sdk.Operator
	backend state.Backend
	// ttlNext is when the backend next has expired state to sweep (0:
	// none), a time the loop wakes for.
	ttlNext   int64
	inputs    []exchange.InputChannel
	barriers  *barrier.Handler
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
		// batch is the whole buffer recs is the rest of, released for
		// reuse once every record went through the operator.
		batch []sdk.Record
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
	suspended bool
	// stopping mirrors syncSavepoint != 0 for other goroutines: a
	// TaskManager's registration reports it.
	stopping atomic.Bool
	finished bool
	// notified is the newest completed checkpoint passed on; triggered
	// the newest checkpoint a source was triggered for.
	notified    int64
	triggered   int64
	nextChannel int
	lastFlush   time.Time
	restoredID  int64

	// next and prev are the subtasks chained after and before this one
	// (Chain); nil when none.
	next, prev *Task
	// chainReplay is recovered output of the subtask before this one in
	// the chain, processed after this one's own recovered input.
	chainReplay []exchange.Buffer
	// chainIn and chainOut count records of a chained subtask until the
	// loop adds them to its metrics.
	chainIn, chainOut int64

	asyncCtx context.Context
	async    sync.WaitGroup
	// progress is read by the heartbeat; it has its own lock.
	progress progress
}

// DefaultBufferTimeout bounds how long a record waits in a partly filled
// output batch unless the job sets its buffer-timeout. A busy subtask
// with few consumers fills its batches (256 records) well before it; the
// bound is for the partly loaded one, a rate-limited source above all,
// whose records would otherwise wait for a full batch. Half a millisecond
// costs at most 2,000 messages per second per channel, little beside the
// CPU a partly loaded pipeline has spare, where Flink's 100ms default
// holds a record up to 100ms. A wide shuffle, whose batches fill slowly
// even when the sender is busy, may want more.
const DefaultBufferTimeout = 500 * time.Microsecond

// New validates the descriptor and builds the subtask; Run starts it.
func New(cfg Config) (*Task, error) {
	d := cfg.Descriptor
	if cfg.QueueCapacity <= 0 {
		cfg.QueueCapacity = 8
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	switch {
	case d.GetBufferTimeout() != nil:
		// The job's own; 0 flushes after every step.
		cfg.FlushInterval = d.GetBufferTimeout().AsDuration()
	case cfg.FlushInterval <= 0:
		cfg.FlushInterval = DefaultBufferTimeout
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
	t.pendingRecords.Store(-1)
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
		CacheBytes:           cfg.StateCacheBytes,
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

func (t *Task) operator() any {
	if t.src != nil {
		return t.src
	}
	return t.op
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
		if restored, err = state.RestoreChannelState(t.cfg.FS, r.GetSubtasks(), d); err != nil {
			return fmt.Errorf("task: restore checkpoint %d: %w", r.GetCheckpointId(), err)
		}
	}
	outputs := d.GetOutputs()
	if t.next != nil {
		// The only output is the chain's: no partition, no writer.
		outputs = nil
	}
	for _, o := range outputs {
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
	t.out = &collector{next: t.next}
	t.side = map[string]*sideCollector{}
	for i, o := range outputs {
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
			if t.prev != nil {
				t.inputs = append(t.inputs, chainedInput{})
				t.gate, t.gateIndex = append(t.gate, gi), append(t.gateIndex, ci)
				continue
			}
			in, err := t.cfg.Network.OpenChannel(ctx, ch, notify)
			if err != nil {
				return fmt.Errorf("task: open input from %s: %w", g.GetSourceVertex(), err)
			}
			t.inputs = append(t.inputs, in)
			t.gate, t.gateIndex = append(t.gate, gi), append(t.gateIndex, ci)
		}
	}
	mode, timeout := barrier.ModeOf(d.GetCheckpointOptions())
	t.barriers = barrier.New(len(t.inputs), mode, timeout)
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

// stateDirOf is the subtask's local state directory.
func stateDirOf(cfg Config) string {
	if cfg.StateDir == "" {
		return os.TempDir()
	}
	return cfg.StateDir
}
