// Package ops holds the operators only the benchmarks use. They are
// registered in bench-taskmanager (the stock TaskManager built with
// worker.Main, like any user's binary) and are kept as cheap as possible so
// they measure the runtime, not themselves.
package ops

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/weirproject/weir/sdk"
)

// Register adds the bench operators.
func Register(r *sdk.Registry) {
	r.RegisterOperator("bench-map", func() sdk.Operator { return &Map{} })
	r.RegisterOperator("discard-sink", func() sdk.Operator { return &Discard{} })
	r.RegisterOperator("spin-sink", func() sdk.Operator { return &Spin{} })
	r.RegisterOperator("ballast", func() sdk.Operator { return &Ballast{} })
	r.RegisterOperator("probe", func() sdk.Operator { return &Probe{} })
	r.RegisterSource("idle-source", func() sdk.Source { return &IdleSource{} })
	r.RegisterSource("clock-source", func() sdk.Source { return &ClockSource{} })
	r.RegisterSource("latency-source", func() sdk.Source { return &LatencySource{} })
	r.RegisterOperator("latency-sink", func() sdk.Operator { return &LatencySink{} })
}

// Map is a stateless pass-through map (Nexmark q0's shape): it emits each
// record unchanged.
type Map struct{}

func (*Map) Open(sdk.Context) error { return nil }
func (*Map) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	out.Collect(r)
	return nil
}
func (*Map) Close() error { return nil }

// Discard drops every record (the runtime still counts records in).
type Discard struct{}

func (*Discard) Open(sdk.Context) error                        { return nil }
func (*Discard) ProcessRecord(sdk.Record, sdk.Collector) error { return nil }
func (*Discard) Close() error                                  { return nil }

// Spin busy-waits config "spin" (a duration) per record and drops it: a
// sink that costs CPU, to put its input under back-pressure.
type Spin struct{ d time.Duration }

func (s *Spin) Open(ctx sdk.Context) error {
	var err error
	s.d, err = ctx.Config().Duration("spin", 200*time.Microsecond)
	return err
}

func (s *Spin) ProcessRecord(sdk.Record, sdk.Collector) error {
	for start := time.Now(); time.Since(start) < s.d; {
	}
	return nil
}
func (s *Spin) Close() error { return nil }

// Ballast holds state for the checkpoint benchmarks: "state-bytes" of
// operator list state from the start, and with "value-bytes" > 0 a keyed
// value of that size for every key it sees (allocated and set once per
// key, so the heap really holds it). It forwards records when "forward" is
// true.
type Ballast struct {
	valueBytes int
	keyed      sdk.ValueState
	forward    bool
}

func (b *Ballast) Open(ctx sdk.Context) error {
	cfg := ctx.Config()
	n, err := cfg.Int("state-bytes", 0)
	if err != nil {
		return err
	}
	vb, err := cfg.Int("value-bytes", 0)
	if err != nil {
		return err
	}
	fw, err := cfg.Int("forward", 0)
	if err != nil {
		return err
	}
	b.forward = fw != 0
	if n > 0 {
		ctx.ListState("ballast").Update([][]byte{make([]byte, n)})
	}
	if vb > 0 {
		b.valueBytes = int(vb)
		b.keyed = ctx.ValueState("ballast")
	}
	return nil
}

func (b *Ballast) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	if b.keyed != nil {
		if _, ok := b.keyed.Value(); !ok {
			v := make([]byte, b.valueBytes)
			copy(v, r.Value)
			b.keyed.Update(v)
		}
	}
	if b.forward {
		out.Collect(r)
	}
	return nil
}

func (b *Ballast) Close() error { return nil }

// Probe forwards records and notes when each checkpoint's barrier passed
// it (the runtime calls SnapshotState right after forwarding the barrier).
// On the checkpoint's completion it appends "<checkpoint> <unix ns>" to
// <dir>/<task>-<subtask>.probe, off the barrier's path.
type Probe struct {
	seen map[int64]int64
	f    *os.File
	w    *bufio.Writer
}

func (p *Probe) Open(ctx sdk.Context) error {
	dir, err := ctx.Config().String("dir", "")
	if err != nil {
		return err
	}
	if dir == "" {
		return fmt.Errorf("probe: config dir is required")
	}
	p.seen = map[int64]int64{}
	p.f, err = os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s-%d.probe", ctx.TaskName(), ctx.SubtaskIndex())), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.w = bufio.NewWriter(p.f)
	return nil
}

func (p *Probe) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	out.Collect(r)
	return nil
}

func (p *Probe) SnapshotState(id int64) error {
	p.seen[id] = time.Now().UnixNano()
	return nil
}

func (p *Probe) NotifyCheckpointComplete(id int64) error {
	for cid, ts := range p.seen {
		if cid <= id {
			fmt.Fprintf(p.w, "%d %d\n", cid, ts)
			delete(p.seen, cid)
		}
	}
	return p.w.Flush()
}

func (p *Probe) NotifyCheckpointAborted(id int64) error {
	delete(p.seen, id)
	return nil
}

func (p *Probe) Close() error {
	if p.f == nil {
		return nil
	}
	err := p.w.Flush()
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// IdleSource emits nothing and holds "state-bytes" of operator state: the
// source of an idle pipeline whose checkpoints carry a little state.
type IdleSource struct{}

func (*IdleSource) Open(ctx sdk.Context) error {
	n, err := ctx.Config().Int("state-bytes", 0)
	if err != nil {
		return err
	}
	if n > 0 {
		ctx.ListState("ballast").Update([][]byte{make([]byte, n)})
	}
	return nil
}

func (*IdleSource) Emit(sdk.Collector) (sdk.SourceStatus, error) {
	return sdk.SourceStatus{Backoff: time.Hour}, nil
}
func (*IdleSource) Close() error { return nil }

// ClockSource emits records on a timeline fixed by the job, not by the
// attempt: subtask s of p owes every i ≡ s (mod p) with i < (now - t0) ×
// rate × p, where t0 ("t0-ms", Unix ms) is in the job's config. After a
// restore it replays from its checkpointed position and runs as fast as it
// can until it is on time again: it catches up. Key = i mod keys.
//
// With "dir" set, a restored attempt appends "<restored checkpoint>
// <opened unix ns> <lag records at open> <caught-up unix ns>" to
// <dir>/clock-<subtask>.catchup once its lag first falls under 10 ms of
// records.
type ClockSource struct {
	rate         float64 // per subtask
	keys, stride int64
	t0           time.Time
	next         int64
	position     sdk.ListState
	dir          string
	sub          int
	restored     int64
	opened       time.Time
	lagAtOpen    int64
	reported     bool
}

func (s *ClockSource) Open(ctx sdk.Context) error {
	cfg := ctx.Config()
	var err error
	if s.rate, err = cfg.Float("rate", 1000); err != nil {
		return err
	}
	if s.keys, err = cfg.Int("keys", 16); err != nil {
		return err
	}
	t0, err := cfg.Int("t0-ms", 0)
	if err != nil {
		return err
	}
	if s.dir, err = cfg.String("dir", ""); err != nil {
		return err
	}
	if s.rate <= 0 || s.keys <= 0 || t0 <= 0 {
		return fmt.Errorf("clock-source: need rate > 0, keys > 0, t0-ms > 0")
	}
	s.t0 = time.UnixMilli(t0)
	s.stride = int64(ctx.Parallelism())
	s.sub = ctx.SubtaskIndex()
	s.next = int64(s.sub)
	s.position = ctx.ListState("position")
	for _, it := range s.position.Get() {
		if len(it) != 8 {
			return fmt.Errorf("clock-source: corrupt position")
		}
		s.next = int64(binary.BigEndian.Uint64(it))
	}
	s.restored = ctx.RestoredCheckpointID()
	s.opened = time.Now()
	s.lagAtOpen = s.due(s.opened) - s.next
	return nil
}

// due is the first index not yet owed at now, rounded up to this subtask's
// residue class.
func (s *ClockSource) due(now time.Time) int64 {
	return int64(now.Sub(s.t0).Seconds() * s.rate * float64(s.stride))
}

func (s *ClockSource) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	now := time.Now()
	due := s.due(now)
	n := 0
	for ; s.next < due && n < 512; n++ {
		out.Collect(sdk.Record{
			Key:   strconv.AppendInt(nil, s.next%s.keys, 10),
			Value: strconv.AppendInt(nil, s.next, 10),
		})
		s.next += s.stride
	}
	lag := (due - s.next) / s.stride // records this subtask still owes
	if s.restored > 0 && !s.reported && float64(lag) < s.rate/100 {
		s.reported = true
		s.report(now)
	}
	if n == 0 {
		// The next record is due in 1/rate.
		return sdk.SourceStatus{Backoff: max(time.Duration(float64(time.Second)/s.rate), 100*time.Microsecond)}, nil
	}
	return sdk.SourceStatus{}, nil
}

func (s *ClockSource) report(now time.Time) {
	if s.dir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(s.dir, fmt.Sprintf("clock-%d.catchup", s.sub)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%d %d %d %d\n", s.restored, s.opened.UnixNano(), s.lagAtOpen/s.stride, now.UnixNano())
	f.Close()
}

func (s *ClockSource) SnapshotState(int64) error {
	it := make([]byte, 8)
	binary.BigEndian.PutUint64(it, uint64(s.next))
	s.position.Update([][]byte{it})
	return nil
}

func (s *ClockSource) Close() error { return nil }
