// Package checkpoint holds what the checkpoint coordinator and the stores
// of completed checkpoints share: the pointer to a completed checkpoint
// and the store's one error the coordinator must tell apart; and how
// shared state files are named, which the state backends write and the
// sweep reads. It lets the
// coordinator depend on the store's contract, not on an implementation
// (the standalone store or etcd's, in internal/ha).
package checkpoint

import "errors"

// Completed points at a completed checkpoint in storage.
type Completed struct {
	ID           int64
	MetadataPath string
	// Dir is the checkpoint's exclusive directory, discarded when subsumed.
	Dir string
	// Savepoint marks a synchronous savepoint (stop-with-savepoint): sinks
	// committed on it, so it is a restore point like a checkpoint, but its
	// files belong to the user and are never discarded when subsumed.
	Savepoint bool
}

// ErrOutcomeUnknown is returned by a store write that may or may not have
// been applied (the request timed out or the connection broke after it was
// sent). The caller must neither treat the checkpoint as stored nor delete
// its files: only reading the store again tells.
var ErrOutcomeUnknown = errors.New("checkpoint store: outcome of the write unknown")
