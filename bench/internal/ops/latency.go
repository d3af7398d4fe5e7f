package ops

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weirproject/weir/bench/internal/stats"
	"github.com/weirproject/weir/sdk"
)

// LatencySource emits records stamped with the time they were created
// (8 bytes, Unix ns, big endian) at "rate" records/s per subtask, paced on
// the wall clock from when it opened; a negative rate emits as fast as the
// output takes them. L1 measures from this stamp to the sink.
type LatencySource struct {
	rate float64
	t0   time.Time
	sent int64
	buf  []byte
	// now is the clock the pacing reads (time.Now; tests fix it). The
	// stamps are always the wall clock: the sink in another process
	// compares them with its own.
	now func() time.Time
}

func (s *LatencySource) Open(ctx sdk.Context) error {
	var err error
	if s.rate, err = ctx.Config().Float("rate", -1); err != nil {
		return err
	}
	if s.rate == 0 {
		return fmt.Errorf("latency-source: rate must not be 0")
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.t0 = s.now()
	return nil
}

func (s *LatencySource) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	now := s.now()
	n := int64(256)
	if s.rate > 0 {
		n = min(int64(now.Sub(s.t0).Seconds()*s.rate)-s.sent, 256)
		if n <= 0 {
			// The next record is due in 1/rate.
			due := s.t0.Add(time.Duration(float64(s.sent+1) / s.rate * float64(time.Second)))
			return sdk.SourceStatus{Backoff: max(due.Sub(now), time.Microsecond)}, nil
		}
	}
	for range n {
		// One allocation per 512 records: the values are slices of it.
		if len(s.buf) < 8 {
			s.buf = make([]byte, 8*512)
		}
		v := s.buf[:8:8]
		s.buf = s.buf[8:]
		binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
		out.Collect(sdk.Record{Value: v})
	}
	s.sent += n
	return sdk.SourceStatus{}, nil
}

func (s *LatencySource) Close() error { return nil }

// LatencySink records, for every record created in one of its "windows"
// windows of "window-ms" from "from-ms" (Unix ms) on, the time from the
// record's creation to its arrival here, in one histogram per window. The
// first record created after the last window makes it write the
// histograms to <dir>/<task>-<subtask>.lat as JSON, once.
type LatencySink struct {
	from, width int64 // ns
	hists       []stats.Histogram
	path        string
	written     bool
}

func (s *LatencySink) Open(ctx sdk.Context) error {
	cfg := ctx.Config()
	dir, err := cfg.String("dir", "")
	if err != nil {
		return err
	}
	from, err := cfg.Int("from-ms", 0)
	if err != nil {
		return err
	}
	width, err := cfg.Int("window-ms", 1000)
	if err != nil {
		return err
	}
	windows, err := cfg.Int("windows", 3)
	if err != nil {
		return err
	}
	if dir == "" || from <= 0 || width <= 0 || windows <= 0 {
		return fmt.Errorf("latency-sink: need dir, from-ms > 0, window-ms > 0, windows > 0")
	}
	s.from, s.width = from*1e6, width*1e6
	s.hists = make([]stats.Histogram, windows)
	s.path = filepath.Join(dir, fmt.Sprintf("%s-%d.lat", ctx.TaskName(), ctx.SubtaskIndex()))
	return nil
}

func (s *LatencySink) ProcessRecord(r sdk.Record, _ sdk.Collector) error {
	if len(r.Value) < 8 || s.written {
		return nil
	}
	now := time.Now().UnixNano()
	created := int64(binary.BigEndian.Uint64(r.Value))
	if created < s.from {
		return nil
	}
	w := (created - s.from) / s.width
	if w < int64(len(s.hists)) {
		s.hists[w].Record(now - created)
		return nil
	}
	s.written = true
	b, err := json.Marshal(s.hists)
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

func (s *LatencySink) Close() error { return nil }
