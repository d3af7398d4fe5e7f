package restapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Asynchronous operations (Flink's "trigger, then poll by request-id"): the
// blocking core call runs on its own goroutine and its outcome is kept in a
// bounded map until it has been finished for storeDuration, like Flink's
// rest.async.store-duration (5 minutes by default).

// opGroup is the status path an operation is polled on: checkpoints are
// polled under /checkpoints/{triggerid}, savepoints and stop-with-savepoint
// under /savepoints/{triggerid}.
type opGroup string

const (
	groupCheckpoint opGroup = "checkpoints"
	groupSavepoint  opGroup = "savepoints"
	// groupDisposal holds savepoint disposals, which belong to no job.
	groupDisposal opGroup = "savepoint-disposal"
)

// opKey identifies an operation. Trigger IDs are per job, as in Flink.
type opKey struct {
	job     string
	group   opGroup
	trigger string
}

// opResult is what a finished operation reports: a value on success or an
// error, never both.
type opResult struct {
	value any
	err   error
}

type operation struct {
	started  time.Time
	finished time.Time // zero while in progress
	result   opResult
}

var (
	errStoreClosed = errors.New("the REST handler is shutting down; no new operations are accepted")
	errStoreFull   = errors.New("too many asynchronous operations are in progress; retry when some have finished")
)

// operations owns the asynchronous operations. Every field below mu is
// guarded by it; the goroutines it starts are tracked by wg and cancelled
// through ctx by close.
type operations struct {
	capacity      int
	storeDuration time.Duration
	now           func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	ops    map[opKey]*operation
}

func newOperations(capacity int, storeDuration time.Duration, now func() time.Time) *operations {
	ctx, cancel := context.WithCancel(context.Background())
	return &operations{
		capacity: capacity, storeDuration: storeDuration, now: now,
		ctx: ctx, cancel: cancel, ops: map[opKey]*operation{},
	}
}

// newTriggerID returns a random 32-hex trigger ID, the shape of Flink's
// TriggerId.
func newTriggerID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// start runs fn on a new goroutine under key. When key is already known the
// call is a no-op and reports existing (Flink's idempotent triggerId).
func (o *operations) start(key opKey, fn func(context.Context) (any, error)) (existing bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false, errStoreClosed
	}
	now := o.now()
	o.expireLocked(now)
	if _, ok := o.ops[key]; ok {
		return true, nil
	}
	if len(o.ops) >= o.capacity && !o.evictOldestFinishedLocked() {
		return false, errStoreFull
	}
	op := &operation{started: now}
	o.ops[key] = op
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		v, err := fn(o.ctx)
		o.mu.Lock()
		op.result = opResult{value: v, err: err}
		op.finished = o.now()
		o.mu.Unlock()
	}()
	return false, nil
}

// get reports an operation's state: found, done and, when done, its result.
func (o *operations) get(key opKey) (found, done bool, res opResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expireLocked(o.now())
	op, ok := o.ops[key]
	if !ok {
		return false, false, opResult{}
	}
	if op.finished.IsZero() {
		return true, false, opResult{}
	}
	return true, true, op.result
}

// expireLocked drops operations finished more than storeDuration ago.
func (o *operations) expireLocked(now time.Time) {
	for k, op := range o.ops {
		if !op.finished.IsZero() && now.Sub(op.finished) > o.storeDuration {
			delete(o.ops, k)
		}
	}
}

// evictOldestFinishedLocked makes room by dropping the operation that
// finished first; operations in progress are never dropped.
func (o *operations) evictOldestFinishedLocked() bool {
	var oldest opKey
	var at time.Time
	for k, op := range o.ops {
		if !op.finished.IsZero() && (at.IsZero() || op.finished.Before(at)) {
			oldest, at = k, op.finished
		}
	}
	if at.IsZero() {
		return false
	}
	delete(o.ops, oldest)
	return true
}

func (o *operations) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ops)
}

// close refuses new operations, cancels the running ones and waits for
// their goroutines to return.
func (o *operations) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.cancel()
	o.wg.Wait()
}
