// Package sdk is the public API for writing Weir operators.
//
// An operator is a Go type registered by name in a Registry; a taskmanager
// binary built with worker.Main runs every operator in its registry. The
// runtime calls an operator only from its subtask's mailbox goroutine, so
// operators need no locking.
//
// State comes in two scopes. Keyed state (ValueState, MapState,
// ReducingState) is scoped to the key of the record being processed; on a
// restore with another parallelism each key's state follows its key group
// to the subtask that now owns it. Operator state (ListState,
// UnionListState) belongs to the subtask and is split, or given whole, on
// restore. Both are in every checkpoint and savepoint, whichever backend
// (heap or Pebble) the job runs on, and a savepoint taken on one backend
// restores on the other.
package sdk

import (
	"iter"
	"log/slog"
	"math"
	"time"
)

// Record is the unit of data that flows between subtasks. Key decides the key
// group (and so the subtask) a record goes to on a hash edge and scopes keyed
// state while the record is processed.
type Record struct {
	Key       []byte
	Value     []byte
	Timestamp int64
	// Headers are the record's metadata, as Kafka carries them: a source
	// that reads them sets them, the exchange carries them, and a sink
	// that writes them writes them. Operators that make new records from
	// old ones decide whether to keep them.
	Headers []Header
}

// Header is one record header. Keys may repeat.
type Header struct {
	Key   string
	Value []byte
}

// Collector passes records downstream. Collect may block while downstream is
// back-pressured.
type Collector interface {
	Collect(Record)
}

// Context is what the runtime gives an operator when it opens.
type Context interface {
	JobID() string
	TaskName() string
	SubtaskIndex() int
	Parallelism() int
	// AttemptNumber counts restarts of this subtask, from 0.
	AttemptNumber() int
	Config() Config
	Logger() *slog.Logger
	// ValueState is keyed state: it reads and writes the value of the key of
	// the record being processed.
	ValueState(name string) ValueState
	// MapState is keyed state holding a map per key: it reads and writes
	// the map of the key of the record being processed. Its entries are
	// stored one by one, so a large map costs per entry touched, not per
	// map, on an embedded (Pebble) backend.
	MapState(name string) MapState
	// ReducingState is keyed state folding everything added for a key
	// into one value with reduce. reduce must not keep or modify its
	// arguments; it returns the new aggregate (which may be acc itself).
	// Every call must pass the same function for a name.
	ReducingState(name string, reduce func(acc, v []byte) []byte) ReducingState
	// ValueStateTTL and MapStateTTL are keyed states whose values (a
	// map's: each entry) expire ttl.TTL after they were last written (or
	// read, with ttl.RefreshOnRead): an expired value is never returned,
	// and the runtime removes it from memory, local disk and the next
	// checkpoints soon after (within the TTL's granularity, at most a
	// second). A state keeps being declared with a TTL or without one: the
	// stored bytes differ.
	ValueStateTTL(name string, ttl StateTTL) ValueState
	MapStateTTL(name string, ttl StateTTL) MapState
	// ListState is operator state: on restore with a different parallelism
	// its items are split round-robin across the new subtasks.
	ListState(name string) ListState
	// UnionListState is operator state that every subtask gets whole on restore.
	UnionListState(name string) ListState
	// RestoredCheckpointID is the checkpoint this subtask was restored from, 0 if none.
	RestoredCheckpointID() int64
	// ReportPending tells the runtime what a source has left to read, for
	// the autoscaler. Safe from any goroutine: a source whose Emit blocks
	// under back-pressure keeps it fresh from a goroutine of its own.
	ReportPending(Pending)
	// TimerService registers timers for the current key; the runtime calls
	// the operator's OnTimer (TimerHandler) when one fires.
	TimerService() TimerService
	// Output is the collector of the named side output. Records collected
	// there go to the downstream vertices that read it (inputs with
	// `output: <name>`), and nowhere when none does.
	Output(name string) Collector
	// EmitLate disposes of a record that arrived behind the watermark by
	// more than the operator allows: it goes to the side output "late"
	// when a downstream vertex reads it, and is counted as dropped
	// (weir_task_late_records_dropped_total) otherwise.
	EmitLate(r Record)
	// Metrics is where the operator publishes its own metrics.
	Metrics() MetricGroup
}

// MetricGroup is an operator's own metrics. The TaskManager exports them
// on its /metrics endpoint with the subtask's labels (job_id, task_name,
// subtask_index) before the operator's, and removes them when the
// subtask ends.
type MetricGroup interface {
	// Gauge returns the gauge family name with the given label names. A
	// name means one family in the TaskManager: every subtask asking for
	// it must give the same help and labels.
	Gauge(name, help string, labels ...string) Gauge
}

// Gauge is a family of gauges, one per combination of label values.
type Gauge interface {
	Set(value float64, labelValues ...string)
	// Delete removes the series of labelValues.
	Delete(labelValues ...string)
}

// Watermarks are event time in milliseconds: a watermark w says no record
// with a timestamp at or below w follows.
const (
	// MinWatermark is the watermark before any was received.
	MinWatermark int64 = math.MinInt64
	// MaxWatermark is the end of event time, reached at the end of bounded
	// input: every event-time timer fires.
	MaxWatermark int64 = math.MaxInt64
)

// LateOutput is the side output EmitLate routes late records to.
const LateOutput = "late"

// TimeDomain says which clock a timer follows.
type TimeDomain uint8

const (
	// EventTime timers fire when the watermark passes them.
	EventTime TimeDomain = iota
	// ProcessingTime timers fire when the wall clock passes them.
	ProcessingTime
)

func (d TimeDomain) String() string {
	if d == ProcessingTime {
		return "processing-time"
	}
	return "event-time"
}

// TimerService is the timer service of a subtask (Flink's TimerService):
// timers are registered for the key of the record (or timer) being
// processed and a namespace the operator chooses (a window, say; nil is
// fine), deduplicated, fired in timestamp order from the mailbox (never
// concurrently with a record), and kept in every checkpoint and savepoint:
// a restored subtask fires them exactly as the failed one would have.
type TimerService interface {
	// CurrentWatermark is the subtask's input watermark, MinWatermark
	// before the first.
	CurrentWatermark() int64
	// CurrentProcessingTime is the subtask's clock, in Unix milliseconds.
	CurrentProcessingTime() int64
	// RegisterEventTimeTimer asks for OnTimer once the watermark reaches ts.
	RegisterEventTimeTimer(namespace []byte, ts int64)
	// RegisterProcessingTimeTimer asks for OnTimer once the clock reaches ts.
	RegisterProcessingTimeTimer(namespace []byte, ts int64)
	DeleteEventTimeTimer(namespace []byte, ts int64)
	DeleteProcessingTimeTimer(namespace []byte, ts int64)
}

// Timer is a timer that fired. Key and Namespace are the runtime's; copy
// them to keep them.
type Timer struct {
	Domain    TimeDomain
	Timestamp int64
	Key       []byte
	Namespace []byte
}

// TimerHandler is implemented by operators that register timers. Keyed
// state is scoped to the timer's key while OnTimer runs.
type TimerHandler interface {
	OnTimer(t Timer, out Collector) error
}

// WatermarkObserver is implemented by operators that act when event time
// advances: OnWatermark runs after the timers the watermark made due fired
// and before the watermark goes downstream.
type WatermarkObserver interface {
	OnWatermark(watermark int64, out Collector) error
}

// MultiInputOperator is implemented by operators that tell their inputs
// apart (joins): the runtime calls ProcessInput instead of ProcessRecord,
// with the index of the input in the vertex's inputs list.
type MultiInputOperator interface {
	ProcessInput(input int, r Record, out Collector) error
}

// SourceOutput is what the Collector a Source's Emit gets also is. A
// source that reads several splits (partitions, files, ranges) emits each
// split's records through that split's output, so watermarks are generated
// per split: a split behind the others holds the subtask's watermark back,
// and an idle one stops doing so. Records collected on the Collector
// itself belong to one implicit split.
type SourceOutput interface {
	Collector
	// Split returns the output of split id, which from now on takes part
	// in the watermark (call it for every split the subtask reads before
	// emitting, so an empty split holds the watermark back too).
	Split(id string) Collector
	// ReleaseSplit says split id is finished: it no longer holds the
	// watermark back.
	ReleaseSplit(id string)
}

// StateMigrator is implemented by the runtime's contexts: MigrateState
// rewrites every stored value of a keyed state (a map's: every entry's
// value), of every key the subtask holds, with f, at once. It is what a
// program whose values' layout changed does on restore, before it reads
// any; an error of f stops it and fails the subtask.
type StateMigrator interface {
	MigrateState(name string, isMap bool, f func(value []byte) ([]byte, error)) error
}

// StateTTL is a keyed state's time to live, on processing time (Flink's
// StateTtlConfig with its default of never returning expired values).
type StateTTL struct {
	// TTL is how long a value lives after its last write; at least a
	// millisecond.
	TTL time.Duration
	// RefreshOnRead restarts the TTL on every read too (Flink's
	// OnReadAndWrite), not only on writes (OnCreateAndWrite).
	RefreshOnRead bool
}

// ValueState holds one value per key.
type ValueState interface {
	Value() ([]byte, bool)
	Update([]byte)
	Clear()
}

// MapState holds a map from user keys to values per key. A value state and
// a map state with the same name are two different states.
type MapState interface {
	// Get returns the value of userKey.
	Get(userKey []byte) ([]byte, bool)
	// Put sets the value of userKey; the state keeps its own copies.
	Put(userKey, value []byte)
	Remove(userKey []byte)
	Contains(userKey []byte) bool
	// All iterates the entries in the byte order of their user keys, as
	// they were when the iteration started: changes made during the loop
	// are not seen by it. The slices are the caller's to keep.
	All() iter.Seq2[[]byte, []byte]
	IsEmpty() bool
	// Clear removes every entry of the current key.
	Clear()
}

// ReducingState holds one aggregate per key, folded by the state's reduce
// function.
type ReducingState interface {
	// Get returns the aggregate, false if nothing was added since the
	// last Clear.
	Get() ([]byte, bool)
	// Add folds v into the aggregate; the first value added is kept as
	// is.
	Add(v []byte)
	Clear()
}

// ListState holds a list of items for the whole subtask.
type ListState interface {
	Get() [][]byte
	Update([][]byte)
	Add([]byte)
	Clear()
}

// Operator processes records from its inputs.
type Operator interface {
	Open(ctx Context) error
	ProcessRecord(r Record, out Collector) error
	Close() error
}

// SourceStatus tells the runtime when to call Emit again.
type SourceStatus struct {
	// EndOfInput reports that the source emitted its last record.
	EndOfInput bool
	// Backoff asks the runtime to wait this long before the next Emit
	// (checkpoints and other mail still run meanwhile).
	Backoff time.Duration
	// Backlog says whether the source is processing a backlog: reading far
	// behind the newest data of its input. While any source of a job is,
	// the job checkpoints at its checkpointing.interval-during-backlog (when
	// set), so catching up is not slowed by checkpoints. BacklogUnknown
	// keeps what the source said last.
	Backlog Backlog
}

// Pending is a source's backlog as it knows it (Context.ReportPending).
type Pending struct {
	Known bool
	// Records are the records it has yet to read (Kafka: how far each
	// partition's end is ahead of the source's position, summed; Flink's
	// pendingRecords).
	Records int64
	// Splits is how many splits (partitions) it reads: more subtasks than
	// the splits of all would idle.
	Splits int
}

// Backlog is a source's answer to whether it is processing a backlog.
type Backlog uint8

const (
	// BacklogUnknown: no news (the zero value; sources that never tell).
	BacklogUnknown Backlog = iota
	// ProcessingBacklog: far behind the input's newest data.
	ProcessingBacklog
	// NoBacklog: caught up.
	NoBacklog
)

// Source produces records. The runtime calls Emit in a loop; checkpoints run
// between calls, so the position a source keeps in state is exact.
type Source interface {
	Open(ctx Context) error
	Emit(out Collector) (SourceStatus, error)
	Close() error
}

// PreBarrierHook is implemented by operators that emit buffered records
// before a checkpoint barrier is forwarded.
type PreBarrierHook interface {
	PrepareSnapshotPreBarrier(checkpointID int64, out Collector) error
}

// Snapshotter is implemented by operators that move in-memory data into
// state right before the state is snapshotted.
type Snapshotter interface {
	SnapshotState(checkpointID int64) error
}

// AsyncSnapshotter is implemented by operators whose snapshot has a slow
// part that needs none of their state, such as the fsync of a file the
// snapshot closed. The subtask calls SnapshotStateAsync where it would
// call SnapshotState, on the operator's goroutine, before the barrier goes
// downstream; the function it returns (nil for none) runs on the
// checkpoint's asynchronous path while records flow again, and the
// checkpoint is acknowledged only after it returned nil. An error from it
// declines the checkpoint; the operator must then fail the subtask itself
// (from its next call) if the checkpoint's state depends on what failed.
type AsyncSnapshotter interface {
	SnapshotStateAsync(checkpointID int64) (finish func() error, err error)
}

// CheckpointListener is implemented by operators with side effects bound to
// checkpoints, such as two-phase-commit sinks.
type CheckpointListener interface {
	NotifyCheckpointComplete(checkpointID int64) error
	NotifyCheckpointAborted(checkpointID int64) error
}

// InputEnder is implemented by operators that act once all inputs ended.
type InputEnder interface {
	EndInput(out Collector) error
}

// DiscardMetrics is a MetricGroup that keeps nothing: for contexts outside
// a TaskManager, such as tests and tools that run operators themselves.
var DiscardMetrics MetricGroup = discardMetrics{}

type discardMetrics struct{}

func (discardMetrics) Gauge(string, string, ...string) Gauge { return discardMetrics{} }
func (discardMetrics) Set(float64, ...string)                {}
func (discardMetrics) Delete(...string)                      {}
