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
	"time"
)

// Record is the unit of data that flows between subtasks. Key decides the key
// group (and so the subtask) a record goes to on a hash edge and scopes keyed
// state while the record is processed.
type Record struct {
	Key       []byte
	Value     []byte
	Timestamp int64
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
	// ListState is operator state: on restore with a different parallelism
	// its items are split round-robin across the new subtasks.
	ListState(name string) ListState
	// UnionListState is operator state that every subtask gets whole on restore.
	UnionListState(name string) ListState
	// RestoredCheckpointID is the checkpoint this subtask was restored from, 0 if none.
	RestoredCheckpointID() int64
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
}

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
