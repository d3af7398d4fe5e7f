package operators

import (
	"fmt"
	"strconv"
	"time"

	"github.com/weirproject/weir/internal/splitsource"
	"github.com/weirproject/weir/sdk"
)

// SequenceSource emits key = i mod keys, value = i for i in [0, count).
// The sequence is cut into splits as splitsource describes: a job started
// at parallelism p has p splits, split s holding i = s, s+p, s+2p, …, and
// subtask s of the first run reads split s. A restore resumes every split
// exactly after the last record that preceded the checkpoint's barrier; a
// restore at another parallelism hands the splits round-robin to the new
// subtasks (each reads its splits in turn). The rate is per subtask.
//
// With event-time {step, jitter} record i carries the timestamp
// i*step − (i mod (jitter/step + 1))*step: time advances by step per
// record and a record comes at most jitter behind the newest. Each split
// is a split of the watermark too, so with more than one per subtask the
// watermark follows the slowest.
type SequenceSource struct {
	count, keys int64
	// reader holds the splits and their positions and paces the records.
	reader splitsource.Reader
	// step and period (jitter/step + 1) make the timestamps; step 0: none.
	step, period, start int64
	// Make, when set, makes record i (with its timestamp) instead of the
	// decimal key and value: the Go API's generator source.
	Make func(i, timestamp int64) sdk.Record

	arena decimalArena
}

func (s *SequenceSource) Open(ctx sdk.Context) error {
	cfg := ctx.Config()
	var err error
	if s.count, err = cfg.Int("count", 0); err != nil {
		return err
	}
	if s.keys, err = cfg.Int("keys", 16); err != nil {
		return err
	}
	rate, err := cfg.Float("rate", 0)
	if err != nil {
		return err
	}
	if s.count < 0 || s.keys <= 0 || rate < 0 {
		return fmt.Errorf("sequence-source: need count >= 0, keys > 0, rate >= 0 (got %d, %d, %v)", s.count, s.keys, rate)
	}
	if s.step, s.period, s.start, err = SequenceEventTime(cfg); err != nil {
		return err
	}
	// As many splits as subtasks: one each on the first run.
	if err := s.reader.Open(ctx, "sequence", s.count, int64(ctx.Parallelism())); err != nil {
		return err
	}
	s.reader.SetRate(rate)
	return nil
}

func (s *SequenceSource) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	return s.reader.Emit(out, func(i int64, split sdk.Collector) { split.Collect(s.record(i)) }), nil
}

// record makes record i.
func (s *SequenceSource) record(i int64) sdk.Record {
	if s.Make != nil {
		return s.Make(i, s.Timestamp(i))
	}
	return sdk.Record{
		Key:       s.arena.appendInt(i % s.keys),
		Value:     s.arena.appendInt(i),
		Timestamp: s.Timestamp(i),
	}
}

// Timestamp is record i's event time in milliseconds; 0 without event time.
func (s *SequenceSource) Timestamp(i int64) int64 {
	if s.step == 0 {
		return 0
	}
	return s.start + i*s.step - (i%s.period)*s.step
}

// SequenceEventTime reads a sequence-source's event-time setting: the
// step in milliseconds, the period of its jitter (jitter/step + 1) and
// the time of record 0 (Unix ms); step 0 when absent.
func SequenceEventTime(cfg sdk.Config) (step, period, start int64, err error) {
	et, err := cfg.Sub("event-time")
	if err != nil || et == nil {
		return 0, 0, 0, err
	}
	st, err := et.Duration("step", time.Millisecond)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("sequence-source: event-time: %w", err)
	}
	jitter, err := et.Duration("jitter", 0)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("sequence-source: event-time: %w", err)
	}
	if st < time.Millisecond || st%time.Millisecond != 0 {
		return 0, 0, 0, fmt.Errorf("sequence-source: event-time.step must be a positive whole number of milliseconds, got %s", st)
	}
	if jitter < 0 || jitter%st != 0 {
		return 0, 0, 0, fmt.Errorf("sequence-source: event-time.jitter must be a non-negative multiple of step (%s), got %s", st, jitter)
	}
	startText, err := et.String("start", "")
	if err != nil {
		return 0, 0, 0, fmt.Errorf("sequence-source: event-time: %w", err)
	}
	if startText != "" {
		t, err := time.Parse(time.RFC3339Nano, startText)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("sequence-source: event-time.start must be an RFC 3339 time, e.g. 2026-01-01T00:00:00Z, got %q", startText)
		}
		start = t.UnixMilli()
	}
	return st.Milliseconds(), int64(jitter/st) + 1, start, nil
}

// SnapshotState stores the splits' positions: the runtime calls it right
// after the barrier went out, so every record before the barrier is
// covered.
func (s *SequenceSource) SnapshotState(int64) error {
	s.reader.Snapshot()
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
