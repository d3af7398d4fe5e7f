package exchange

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// ErrReleased is returned to a producer writing into a released partition.
var ErrReleased = errors.New("exchange: partition released")

// Subpartition is the bounded queue between a producer subtask and one
// consumer subtask.
type Subpartition struct {
	capacity int
	// space wakes a producer blocked on a full queue.
	space chan struct{}

	mu struct {
		sync.Mutex
		queue    []Buffer
		listener func()
		released bool
	}
}

// NewSubpartition returns a queue holding at most capacity buffers.
func NewSubpartition(capacity int) *Subpartition {
	return &Subpartition{capacity: capacity, space: make(chan struct{}, 1)}
}

// Add appends b, blocking while the queue is full. It returns how long it was
// blocked, which is the producer's back-pressured time.
func (s *Subpartition) Add(ctx context.Context, b Buffer) (time.Duration, error) {
	var start time.Time
	s.mu.Lock()
	for len(s.mu.queue) >= s.capacity && !s.mu.released {
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
	if s.mu.released {
		s.mu.Unlock()
		return blocked, ErrReleased
	}
	s.mu.queue = append(s.mu.queue, b)
	notify := len(s.mu.queue) == 1
	listener := s.mu.listener
	s.mu.Unlock()
	if notify && listener != nil {
		listener()
	}
	return blocked, nil
}

// Poll takes the head buffer without blocking. backlog is how many remain.
func (s *Subpartition) Poll() (b Buffer, backlog int, ok bool) {
	s.mu.Lock()
	if len(s.mu.queue) == 0 {
		s.mu.Unlock()
		return Buffer{}, 0, false
	}
	b = s.mu.queue[0]
	s.mu.queue[0] = Buffer{}
	s.mu.queue = s.mu.queue[1:]
	backlog = len(s.mu.queue)
	s.mu.Unlock()
	select {
	case s.space <- struct{}{}:
	default:
	}
	return b, backlog, true
}

// SetListener installs the reader's wake-up, called whenever the queue turns
// non-empty; it is called at once if the queue already holds data.
func (s *Subpartition) SetListener(f func()) {
	s.mu.Lock()
	s.mu.listener = f
	nonEmpty := len(s.mu.queue) > 0
	s.mu.Unlock()
	if nonEmpty && f != nil {
		f()
	}
}

// Release drops the queue and fails blocked and later writers.
func (s *Subpartition) Release() {
	s.mu.Lock()
	s.mu.released = true
	s.mu.queue = nil
	s.mu.Unlock()
	select {
	case s.space <- struct{}{}:
	default:
	}
}

// ResultPartition is one producer subtask's output to one consumer vertex.
type ResultPartition struct {
	ID   *weirv1.ResultPartitionID
	Subs []*Subpartition
}

// NewResultPartition makes a partition with n subpartitions.
func NewResultPartition(id *weirv1.ResultPartitionID, n, capacity int) *ResultPartition {
	p := &ResultPartition{ID: id}
	for range n {
		p.Subs = append(p.Subs, NewSubpartition(capacity))
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
	return fmt.Sprintf("%s/%s/%d/%d->%s", a.GetJobId(), a.GetVertex(), a.GetSubtaskIndex(), a.GetAttempt(), id.GetConsumerVertex())
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
