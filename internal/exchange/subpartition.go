package exchange

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// ErrReleased is returned to a producer writing into a released partition.
var ErrReleased = errors.New("exchange: partition released")

// Subpartition is the bounded queue between a producer subtask and one
// consumer subtask.
//
// Below capacity buffers it is Available: a subtask starts new work
// (takes the next input, lets a source emit) only while every subpartition
// it writes to is. Work already started may go up to overdraft buffers past
// capacity before a data Add blocks, so a subtask seldom blocks in the middle
// of a record and its mailbox keeps running mail (checkpoint triggers,
// notifications) while it is back-pressured. Events never block: they are
// few and small, and an event waiting for space would stall the mailbox
// that sends it. A priority event (an unaligned checkpoint's barrier) goes
// to the head of the queue, behind earlier priority events only.
type Subpartition struct {
	capacity int
	// limit is capacity plus overdraft: data Adds block at this length.
	limit int
	// space wakes a producer blocked in Add.
	space chan struct{}

	mu struct {
		sync.Mutex
		queue []Buffer
		// priority counts the priority events at the head of queue.
		priority int
		// bytes is the payload of the records queued.
		bytes int64
		// listener is the consumer's wake-up: the queue turned non-empty or
		// got a priority event.
		listener func()
		// available is the producer's wake-up: the queue fell below
		// capacity, or a barrier left it.
		available func()
		released  bool
	}
}

// NewSubpartition returns a queue that is available below capacity buffers
// and blocks data Adds at capacity+overdraft.
func NewSubpartition(capacity, overdraft int) *Subpartition {
	capacity = max(capacity, 1)
	return &Subpartition{capacity: capacity, limit: capacity + max(overdraft, 0), space: make(chan struct{}, 1)}
}

// Add appends b. A records buffer blocks while the queue holds
// capacity+overdraft buffers; an event never blocks. Add returns how long it
// was blocked, which is the producer's back-pressured time.
func (s *Subpartition) Add(ctx context.Context, b Buffer) (time.Duration, error) {
	if b.Priority {
		_, err := s.AddPriority(b)
		return 0, err
	}
	var start time.Time
	s.mu.Lock()
	for b.Kind == KindRecords && len(s.mu.queue) >= s.limit && !s.mu.released {
		s.mu.Unlock()
		if start.IsZero() {
			start = time.Now()
		}
		select {
		case <-s.space:
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		}
		s.mu.Lock()
	}
	var blocked time.Duration
	if !start.IsZero() {
		blocked = time.Since(start)
	}
	return blocked, s.appendLocked(b)
}

// Put appends b without blocking, past the limit if need be. It is for the
// few buffers that must not wait: the batch an event flushes ahead of
// itself, and the output state a restored subtask re-emits.
func (s *Subpartition) Put(b Buffer) error {
	if b.Priority {
		_, err := s.AddPriority(b)
		return err
	}
	s.mu.Lock()
	return s.appendLocked(b)
}

// appendLocked appends b and unlocks s.mu.
func (s *Subpartition) appendLocked(b Buffer) error {
	if s.mu.released {
		s.mu.Unlock()
		return ErrReleased
	}
	s.mu.queue = append(s.mu.queue, b)
	s.mu.bytes += b.Size()
	notify := len(s.mu.queue) == 1
	listener := s.mu.listener
	s.mu.Unlock()
	if notify && listener != nil {
		listener()
	}
	return nil
}

// AddPriority puts event b at the head of the queue, behind the priority
// events already there, without blocking. It returns the records buffers b
// overtook, oldest first: they stay queued behind b, and the producer
// records them as the output state of b's checkpoint.
func (s *Subpartition) AddPriority(b Buffer) ([]Buffer, error) {
	b.Priority = true
	s.mu.Lock()
	if s.mu.released {
		s.mu.Unlock()
		return nil, ErrReleased
	}
	at := s.mu.priority
	var overtaken []Buffer
	for _, q := range s.mu.queue[at:] {
		if q.Kind == KindRecords {
			overtaken = append(overtaken, q)
		}
	}
	// Copied under the lock: the consumer releases each batch it took.
	overtaken = CloneRecords(overtaken)
	s.mu.queue = slices.Insert(s.mu.queue, at, b)
	s.mu.priority++
	listener := s.mu.listener
	s.mu.Unlock()
	// The consumer must learn of a priority event even when the queue was
	// not empty: it may be reading other channels, or not reading at all.
	if listener != nil {
		listener()
	}
	return overtaken, nil
}

// ConvertBarrier moves the barrier of checkpoint id, if it is still
// queued, to the head of the queue as a priority event, its barrier
// replaced by convert's result: an aligned barrier that waited too long
// becomes unaligned. It returns the records buffers the barrier overtook,
// oldest first, and whether the barrier was still queued.
func (s *Subpartition) ConvertBarrier(id int64, convert func(*weirv1.CheckpointBarrier) *weirv1.CheckpointBarrier) ([]Buffer, bool) {
	s.mu.Lock()
	at := s.mu.priority
	k := -1
	for i := at; i < len(s.mu.queue); i++ {
		if q := s.mu.queue[i]; q.Kind == KindBarrier && q.Barrier.GetCheckpointId() == id {
			k = i
			break
		}
	}
	if k < 0 {
		s.mu.Unlock()
		return nil, false
	}
	var overtaken []Buffer
	for _, q := range s.mu.queue[at:k] {
		if q.Kind == KindRecords {
			overtaken = append(overtaken, q)
		}
	}
	overtaken = CloneRecords(overtaken)
	b := s.mu.queue[k]
	b.Barrier, b.Priority = convert(b.Barrier), true
	copy(s.mu.queue[at+1:k+1], s.mu.queue[at:k])
	s.mu.queue[at] = b
	s.mu.priority++
	listener := s.mu.listener
	s.mu.Unlock()
	if listener != nil {
		listener()
	}
	return overtaken, true
}

// HoldsBarrier reports whether the barrier of checkpoint id is queued.
func (s *Subpartition) HoldsBarrier(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.mu.queue {
		if q.Kind == KindBarrier && q.Barrier.GetCheckpointId() == id {
			return true
		}
	}
	return false
}

// Poll takes the head buffer without blocking. backlog is how many remain.
func (s *Subpartition) Poll() (b Buffer, backlog int, ok bool) {
	return s.poll(false)
}

// PollPriority takes the head buffer only if it is a priority event: what a
// consumer may take without a credit, or while it reads nothing else.
func (s *Subpartition) PollPriority() (b Buffer, backlog int, ok bool) {
	return s.poll(true)
}

func (s *Subpartition) poll(priorityOnly bool) (b Buffer, backlog int, ok bool) {
	s.mu.Lock()
	if len(s.mu.queue) == 0 || (priorityOnly && s.mu.priority == 0) {
		s.mu.Unlock()
		return Buffer{}, 0, false
	}
	b = s.mu.queue[0]
	s.mu.queue[0] = Buffer{}
	s.mu.queue = s.mu.queue[1:]
	if s.mu.priority > 0 {
		s.mu.priority--
	}
	s.mu.bytes -= b.Size()
	backlog = len(s.mu.queue)
	var available func()
	if backlog == s.capacity-1 || b.Kind == KindBarrier {
		available = s.mu.available
	}
	s.mu.Unlock()
	select {
	case s.space <- struct{}{}:
	default:
	}
	if available != nil {
		available()
	}
	return b, backlog, true
}

// Available reports whether the queue is below capacity, so its producer
// may start new work. A released queue is available: writing to it fails.
func (s *Subpartition) Available() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.queue) < s.capacity || s.mu.released
}

// Queued returns how many buffers are queued and their payload in bytes.
func (s *Subpartition) Queued() (buffers int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.queue), s.mu.bytes
}

// SetListener installs the reader's wake-up, called whenever the queue turns
// non-empty or gets a priority event; it is called at once if the queue
// already holds data.
func (s *Subpartition) SetListener(f func()) {
	s.mu.Lock()
	s.mu.listener = f
	nonEmpty := len(s.mu.queue) > 0
	s.mu.Unlock()
	if nonEmpty && f != nil {
		f()
	}
}

// SetAvailabilityListener installs the producer's wake-up, called whenever
// the queue falls below capacity or a barrier leaves it (and on release).
func (s *Subpartition) SetAvailabilityListener(f func()) {
	s.mu.Lock()
	s.mu.available = f
	s.mu.Unlock()
}

// Release drops the queue and fails blocked and later writers.
func (s *Subpartition) Release() {
	s.mu.Lock()
	s.mu.released = true
	s.mu.queue = nil
	s.mu.priority, s.mu.bytes = 0, 0
	available := s.mu.available
	s.mu.Unlock()
	select {
	case s.space <- struct{}{}:
	default:
	}
	if available != nil {
		available()
	}
}

// ResultPartition is one producer subtask's output to one consumer vertex.
type ResultPartition struct {
	ID   *weirv1.ResultPartitionID
	Subs []*Subpartition
}

// NewResultPartition makes a partition with n subpartitions of the given
// capacity and overdraft (see Subpartition).
func NewResultPartition(id *weirv1.ResultPartitionID, n, capacity, overdraft int) *ResultPartition {
	p := &ResultPartition{ID: id}
	for range n {
		p.Subs = append(p.Subs, NewSubpartition(capacity, overdraft))
	}
	return p
}

// Release releases every subpartition.
func (p *ResultPartition) Release() {
	for _, s := range p.Subs {
		s.Release()
	}
}

// PartitionKey is the registry key of a result partition.
func PartitionKey(id *weirv1.ResultPartitionID) string {
	a := id.GetProducer()
	return fmt.Sprintf("%s/%s/%d/%d@%s->%s", a.GetJobId(), a.GetVertex(), a.GetSubtaskIndex(), a.GetAttempt(), a.GetSession(), id.GetConsumerVertex())
}

// Registry holds the result partitions produced on one TaskManager so local
// consumers and remote subscribers can find them.
type Registry struct {
	mu struct {
		sync.Mutex
		parts map[string]*ResultPartition
		// changed is closed and replaced whenever a partition registers.
		changed chan struct{}
	}
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	r := &Registry{}
	r.mu.parts = map[string]*ResultPartition{}
	r.mu.changed = make(chan struct{})
	return r
}

// Register makes p visible to consumers.
func (r *Registry) Register(p *ResultPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.parts[PartitionKey(p.ID)] = p
	close(r.mu.changed)
	r.mu.changed = make(chan struct{})
}

// Release removes and releases a partition.
func (r *Registry) Release(id *weirv1.ResultPartitionID) {
	r.mu.Lock()
	p := r.mu.parts[PartitionKey(id)]
	delete(r.mu.parts, PartitionKey(id))
	r.mu.Unlock()
	if p != nil {
		p.Release()
	}
}

// Lookup waits until the partition is registered: a consumer may be deployed
// before its producer.
func (r *Registry) Lookup(ctx context.Context, id *weirv1.ResultPartitionID) (*ResultPartition, error) {
	key := PartitionKey(id)
	for {
		r.mu.Lock()
		p, ok := r.mu.parts[key]
		changed := r.mu.changed
		r.mu.Unlock()
		if ok {
			return p, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("exchange: partition %s not found: %w", key, ctx.Err())
		}
	}
}

// Forget removes a partition from the registry without releasing it, so
// consumers already attached drain what is queued.
func (r *Registry) Forget(id *weirv1.ResultPartitionID) {
	r.mu.Lock()
	delete(r.mu.parts, PartitionKey(id))
	r.mu.Unlock()
}
