package operators

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/weirproject/weir/sdk"
)

// SequenceSource emits key = i mod keys, value = i for i in [0, count),
// split across its subtasks: subtask s of p emits i = s, s+p, s+2p, …
// Its position is operator state, so a restored source resumes exactly
// after the last record that preceded the checkpoint's barrier.
type SequenceSource struct {
	count, keys int64
	rate        float64
	stride      int64
	next        int64 // the next i to emit
	position    sdk.ListState

	// rate limiting: records emitted since start at the configured rate
	start   time.Time
	emitted int64
}

// maxPerEmit bounds one Emit call so checkpoints are not delayed behind it.
const maxPerEmit = 512

func (s *SequenceSource) Open(ctx sdk.Context) error {
	cfg := ctx.Config()
	var err error
	if s.count, err = cfg.Int("count", 0); err != nil {
		return err
	}
	if s.keys, err = cfg.Int("keys", 16); err != nil {
		return err
	}
	if s.rate, err = cfg.Float("rate", 0); err != nil {
		return err
	}
	if s.count < 0 || s.keys <= 0 || s.rate < 0 {
		return fmt.Errorf("sequence-source: need count >= 0, keys > 0, rate >= 0 (got %d, %d, %v)", s.count, s.keys, s.rate)
	}
	s.stride = int64(ctx.Parallelism())
	s.next = int64(ctx.SubtaskIndex())
	s.position = ctx.ListState("position")
	// Positions are stored per original subtask as (subtask, next). A restore
	// at the same parallelism gives each subtask its own entry back.
	for _, it := range s.position.Get() {
		if len(it) != 16 {
			return fmt.Errorf("sequence-source: corrupt position state (%d bytes)", len(it))
		}
		sub, next := int64(binary.BigEndian.Uint64(it)), int64(binary.BigEndian.Uint64(it[8:]))
		if sub%s.stride != int64(ctx.SubtaskIndex()) {
			return fmt.Errorf("sequence-source: restored position of subtask %d at parallelism %d; rescaling this source is not supported", sub, s.stride)
		}
		s.next = next
	}
	return nil
}

func (s *SequenceSource) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	n := int64(maxPerEmit)
	if s.rate > 0 {
		now := time.Now()
		if s.start.IsZero() {
			s.start = now
		}
		due := int64(now.Sub(s.start).Seconds()*s.rate) + 1 - s.emitted
		if due <= 0 {
			wait := time.Duration(float64(s.emitted+1)/s.rate*float64(time.Second)) - now.Sub(s.start)
			return sdk.SourceStatus{Backoff: max(wait, time.Millisecond)}, nil
		}
		n = min(n, due)
	}
	for ; n > 0; n-- {
		if s.count > 0 && s.next >= s.count {
			return sdk.SourceStatus{EndOfInput: true}, nil
		}
		out.Collect(sdk.Record{
			Key:   strconv.AppendInt(nil, s.next%s.keys, 10),
			Value: strconv.AppendInt(nil, s.next, 10),
		})
		s.next += s.stride
		s.emitted++
	}
	if s.count > 0 && s.next >= s.count {
		return sdk.SourceStatus{EndOfInput: true}, nil
	}
	return sdk.SourceStatus{}, nil
}

// SnapshotState stores the position: the runtime calls it right after the
// barrier went out, so every record before the barrier is covered.
func (s *SequenceSource) SnapshotState(int64) error {
	it := make([]byte, 16)
	binary.BigEndian.PutUint64(it, uint64(s.next%s.stride))
	binary.BigEndian.PutUint64(it[8:], uint64(s.next))
	s.position.Update([][]byte{it})
	return nil
}

func (s *SequenceSource) Close() error { return nil }
