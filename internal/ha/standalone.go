package ha

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/weirproject/weir/internal/checkpoint"
)

// StandaloneCounter hands out checkpoint IDs from memory, starting after
// the highest ID already present in checkpoint storage.
type StandaloneCounter struct {
	mu   sync.Mutex
	next int64
}

// NewStandaloneCounter returns a counter whose first ID is after.
func NewStandaloneCounter(after int64) *StandaloneCounter {
	return &StandaloneCounter{next: after + 1}
}

// Next returns a fresh checkpoint ID.
func (c *StandaloneCounter) Next(context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next++
	return id, nil
}

// StandaloneStore keeps the newest retained completed checkpoints in memory.
type StandaloneStore struct {
	retained int
	mu       sync.Mutex
	list     []checkpoint.Completed // oldest first
}

// NewStandaloneStore keeps at most retained (≥ 1) checkpoints.
func NewStandaloneStore(retained int) *StandaloneStore {
	return &StandaloneStore{retained: max(retained, 1)}
}

// Add stores cp and returns the checkpoints it subsumed, oldest first; the
// caller discards their state.
func (s *StandaloneStore) Add(_ context.Context, cp checkpoint.Completed) ([]checkpoint.Completed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, cp)
	var subsumed []checkpoint.Completed
	if n := len(s.list) - s.retained; n > 0 {
		subsumed = append(subsumed, s.list[:n]...)
		s.list = append([]checkpoint.Completed(nil), s.list[n:]...)
	}
	return subsumed, nil
}

// Latest returns the newest completed checkpoint.
func (s *StandaloneStore) Latest(context.Context) (checkpoint.Completed, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.list) == 0 {
		return checkpoint.Completed{}, false, nil
	}
	return s.list[len(s.list)-1], true, nil
}

// All returns the retained checkpoints, oldest first.
func (s *StandaloneStore) All(context.Context) ([]checkpoint.Completed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]checkpoint.Completed(nil), s.list...), nil
}

// RecoverReport returns the retained checkpoints that pass validate (nil
// accepts all), oldest first, and the ones that did not.
func (s *StandaloneStore) RecoverReport(_ context.Context, validate func(checkpoint.Completed) error) (kept []checkpoint.Completed, skipped []SkippedCheckpoint, err error) {
	s.mu.Lock()
	list := append([]checkpoint.Completed(nil), s.list...)
	s.mu.Unlock()
	for _, cp := range list {
		if validate != nil {
			if verr := validate(cp); verr != nil {
				skipped = append(skipped, SkippedCheckpoint{Key: strconv.FormatInt(cp.ID, 10), ID: cp.ID, Err: fmt.Errorf("invalid: %w", verr)})
				continue
			}
		}
		kept = append(kept, cp)
	}
	return kept, skipped, nil
}

// SetIfHigher makes the next ID at least v+1 (a job restored from
// checkpoint v goes on after it).
func (c *StandaloneCounter) SetIfHigher(_ context.Context, v int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next = max(c.next, v+1)
	return nil
}

// Shutdown forgets every checkpoint; with discard it returns them so the
// caller can delete their files.
func (s *StandaloneStore) Shutdown(_ context.Context, discard bool) ([]checkpoint.Completed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.list
	s.list = nil
	if !discard {
		return nil, nil
	}
	return list, nil
}
