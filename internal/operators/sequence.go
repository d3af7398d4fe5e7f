package operators

import (
	"encoding/binary"
	"fmt"
	"math"
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
	now     func() time.Time // time.Now when nil; tests drive a fake clock
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
	// Positions are stored per original subtask as (subtask, parallelism,
	// next). A restore at the same parallelism gives each subtask its own
	// entry back; any other split of the entries is a rescale.
	items := s.position.Get()
	for _, it := range items {
		if len(it) != positionSize {
			return fmt.Errorf("sequence-source: corrupt position state (%d bytes)", len(it))
		}
		sub, par, next := int64(binary.BigEndian.Uint64(it)), int64(binary.BigEndian.Uint64(it[8:])), int64(binary.BigEndian.Uint64(it[16:]))
		if par != s.stride || sub != int64(ctx.SubtaskIndex()) || len(items) > 1 {
			return fmt.Errorf("sequence-source: restored position of subtask %d at parallelism %d into subtask %d at parallelism %d (%d positions); rescaling this source is not supported",
				sub, par, ctx.SubtaskIndex(), s.stride, len(items))
		}
		if next < 0 || next%s.stride != sub {
			return fmt.Errorf("sequence-source: corrupt position state (subtask %d, next %d)", sub, next)
		}
		s.next = next
	}
	return nil
}

// positionSize is the size of a position state item.
const positionSize = 24

func (s *SequenceSource) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	n := int64(maxPerEmit)
	if s.rate > 0 {
		clock := s.now
		if clock == nil {
			clock = time.Now
		}
		now := clock()
		if s.start.IsZero() {
			s.start = now
		}
		// One record is due at the start and one more every 1/rate, so the
		// next one (number emitted+1) is due at emitted/rate.
		elapsed := now.Sub(s.start)
		due := int64(elapsed.Seconds()*s.rate) + 1 - s.emitted
		if due <= 0 {
			wait := time.Duration(math.Ceil(float64(s.emitted)/s.rate*float64(time.Second))) - elapsed
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
	it := make([]byte, positionSize)
	binary.BigEndian.PutUint64(it, uint64(s.next%s.stride))
	binary.BigEndian.PutUint64(it[8:], uint64(s.stride))
	binary.BigEndian.PutUint64(it[16:], uint64(s.next))
	s.position.Update([][]byte{it})
	return nil
}

func (s *SequenceSource) Close() error { return nil }
