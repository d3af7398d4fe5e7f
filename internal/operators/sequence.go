package operators

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/weirproject/weir/sdk"
)

// SequenceSource emits key = i mod keys, value = i for i in [0, count).
// The sequence is cut into splits, as Flink's sources are: a job started at
// parallelism p has p splits, split s holding i = s, s+p, s+2p, …, and
// subtask s of the first run reads split s. Each split's position is an
// item of operator list state, so a restored source resumes every split
// exactly after the last record that preceded the checkpoint's barrier, and
// a restore at another parallelism hands the splits round-robin to the new
// subtasks (each reads its splits in turn).
//
// With event-time {step, jitter} record i carries the timestamp
// i*step − (i mod (jitter/step + 1))*step: time advances by step per
// record and a record comes at most jitter behind the newest. Each split
// is a split of the watermark too, so with more than one per subtask the
// watermark follows the slowest.
type SequenceSource struct {
	count, keys int64
	rate        float64
	splits      []split
	cur         int // the split the next record comes from
	position    sdk.ListState
	// step and period (jitter/step + 1) make the timestamps; step 0: none.
	step, period int64
	// outs are the splits' outputs, made at the first Emit.
	outs []sdk.Collector
	// Make, when set, makes record i (with its timestamp) instead of the
	// decimal key and value: the Go API's generator source.
	Make func(i, timestamp int64) sdk.Record

	// rate limiting: records emitted since start at the configured rate
	start   time.Time
	emitted int64
	now     func() time.Time // time.Now when nil; tests drive a fake clock

	arena decimalArena
}

// split is an arithmetic progression of the sequence and its position.
type split struct {
	first, stride, next int64
}

func (sp split) done(count int64) bool { return count > 0 && sp.next >= count }

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
	if s.step, s.period, err = SequenceEventTime(cfg); err != nil {
		return err
	}
	s.position = ctx.ListState("position")
	items := s.position.Get()
	if len(items) == 0 && ctx.RestoredCheckpointID() == 0 {
		p, i := int64(ctx.Parallelism()), int64(ctx.SubtaskIndex())
		s.splits = []split{{first: i, stride: p, next: i}}
		return nil
	}
	for _, it := range items {
		if len(it) != positionSize {
			return fmt.Errorf("sequence-source: corrupt position state (%d bytes)", len(it))
		}
		sp := split{
			first:  int64(binary.BigEndian.Uint64(it)),
			stride: int64(binary.BigEndian.Uint64(it[8:])),
			next:   int64(binary.BigEndian.Uint64(it[16:])),
		}
		if sp.stride <= 0 || sp.first < 0 || sp.first >= sp.stride || sp.next < sp.first || (sp.next-sp.first)%sp.stride != 0 {
			return fmt.Errorf("sequence-source: corrupt position state (split %d/%d at %d)", sp.first, sp.stride, sp.next)
		}
		s.splits = append(s.splits, sp)
	}
	// A restored subtask may get no split (more subtasks than splits): it
	// has nothing to emit.
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
	if s.outs == nil {
		s.openSplits(out)
	}
	for ; n > 0; n-- {
		sp := s.nextSplit()
		if sp == nil {
			return sdk.SourceStatus{EndOfInput: true}, nil
		}
		i := sp.next
		if s.Make != nil {
			s.outs[s.cur].Collect(s.Make(i, s.Timestamp(i)))
		} else {
			s.outs[s.cur].Collect(sdk.Record{
				Key:       s.arena.appendInt(i % s.keys),
				Value:     s.arena.appendInt(i),
				Timestamp: s.Timestamp(i),
			})
		}
		sp.next += sp.stride
		s.emitted++
		if sp.done(s.count) {
			if so, ok := out.(sdk.SourceOutput); ok {
				so.ReleaseSplit(sp.id())
			}
		}
	}
	if s.nextSplit() == nil {
		return sdk.SourceStatus{EndOfInput: true}, nil
	}
	return sdk.SourceStatus{}, nil
}

// openSplits gives every split with records left its own output, so each
// is a split of the watermark.
func (s *SequenceSource) openSplits(out sdk.Collector) {
	s.outs = make([]sdk.Collector, len(s.splits))
	so, ok := out.(sdk.SourceOutput)
	for i, sp := range s.splits {
		s.outs[i] = out
		if ok && !sp.done(s.count) {
			s.outs[i] = so.Split(sp.id())
		}
	}
}

func (sp split) id() string { return fmt.Sprintf("sequence-%d-of-%d", sp.first, sp.stride) }

// Timestamp is record i's event time in milliseconds; 0 without event time.
func (s *SequenceSource) Timestamp(i int64) int64 {
	if s.step == 0 {
		return 0
	}
	return i*s.step - (i%s.period)*s.step
}

// SequenceEventTime reads a sequence-source's event-time setting: the
// step in milliseconds and the period of its jitter (jitter/step + 1);
// step 0 when absent.
func SequenceEventTime(cfg sdk.Config) (step, period int64, err error) {
	et, err := cfg.Sub("event-time")
	if err != nil || et == nil {
		return 0, 0, err
	}
	st, err := et.Duration("step", time.Millisecond)
	if err != nil {
		return 0, 0, fmt.Errorf("sequence-source: event-time: %w", err)
	}
	jitter, err := et.Duration("jitter", 0)
	if err != nil {
		return 0, 0, fmt.Errorf("sequence-source: event-time: %w", err)
	}
	if st < time.Millisecond || st%time.Millisecond != 0 {
		return 0, 0, fmt.Errorf("sequence-source: event-time.step must be a positive whole number of milliseconds, got %s", st)
	}
	if jitter < 0 || jitter%st != 0 {
		return 0, 0, fmt.Errorf("sequence-source: event-time.jitter must be a non-negative multiple of step (%s), got %s", st, jitter)
	}
	return st.Milliseconds(), int64(jitter/st) + 1, nil
}

// nextSplit picks the next split with records left, round-robin; nil when
// every split is exhausted.
func (s *SequenceSource) nextSplit() *split {
	for range s.splits {
		s.cur = (s.cur + 1) % len(s.splits)
		if sp := &s.splits[s.cur]; !sp.done(s.count) {
			return sp
		}
	}
	return nil
}

// SnapshotState stores the position: the runtime calls it right after the
// barrier went out, so every record before the barrier is covered.
func (s *SequenceSource) SnapshotState(int64) error {
	items := make([][]byte, len(s.splits))
	for i, sp := range s.splits {
		it := make([]byte, positionSize)
		binary.BigEndian.PutUint64(it, uint64(sp.first))
		binary.BigEndian.PutUint64(it[8:], uint64(sp.stride))
		binary.BigEndian.PutUint64(it[16:], uint64(sp.next))
		items[i] = it
	}
	s.position.Update(items)
	return nil
}

func (s *SequenceSource) Close() error { return nil }

// decimalArena formats the decimal keys and values of emitted records into
// shared chunks: one allocation per chunk rather than one per number. A
// chunk is never written again where it handed out bytes, so a record stays
// valid while downstream holds it; a chunk is freed with its last record.
type decimalArena struct{ buf []byte }

const arenaChunk = 8 << 10

func (a *decimalArena) appendInt(v int64) []byte {
	if cap(a.buf)-len(a.buf) < 20 { // the longest int64: "-9223372036854775808"
		a.buf = make([]byte, 0, arenaChunk)
	}
	start := len(a.buf)
	a.buf = strconv.AppendInt(a.buf, v, 10)
	// Capped: a consumer appending to the record reallocates instead of
	// overwriting the next one.
	return a.buf[start:len(a.buf):len(a.buf)]
}

// parseDecimal parses a decimal int64 without converting b to a string
// (which allocates); ok is false for anything strconv would have to judge.
func parseDecimal(b []byte) (v int64, ok bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 { // 18 digits cannot overflow
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// parseInt is strconv.ParseInt for b, without its allocation in the
// common case.
func parseInt(b []byte) (int64, error) {
	if v, ok := parseDecimal(b); ok {
		return v, nil
	}
	return strconv.ParseInt(string(b), 10, 64)
}
