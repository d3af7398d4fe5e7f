package nexmark

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/weirproject/weir/sdk"
)

// Source is the nexmark-source operator: the Nexmark event stream as
// records, key the event kind ("person", "auction", "bid"; empty with
// key: none), value the event's encoding (Encode), timestamp its event
// time in milliseconds.
//
// Config:
//
//	events            how many events (0: unbounded)
//	rate              wall-clock limit of the whole stream in events/s,
//	                  shared by the subtasks in proportion to the splits
//	                  they read (0: as fast as possible)
//	first-event-rate  event-time rate in events/s (Config.FirstEventRate)
//	splits            number of splits (default: the parallelism of the
//	                  first run)
//	base-time         event time of event 0, RFC 3339 (Config.BaseTime)
//	hot-auction-ratio, hot-bidder-ratio, hot-seller-ratio
//	key               kind (default) or none
//
// The stream is cut into splits as sequence-source's is: event n belongs to
// split n mod splits and split s is read by subtask s mod parallelism of
// the first run. Each split's next event number is an item of operator
// list state, so a restore resumes every split exactly after the last event
// that preceded the checkpoint's barrier, and a restore at another
// parallelism hands the splits round-robin to the new subtasks. The
// configured splits matter only to the first run: a restored job keeps the
// splits of its state. Each split is a split of the watermark, whose event
// times increase with n.
type Source struct {
	gen    Config
	events int64
	rate   float64 // this subtask's share, events/s; 0: unlimited
	noKey  bool

	splits   []split
	cur      int
	position sdk.ListState
	outs     []sdk.Collector

	start   time.Time
	emitted int64
	now     func() time.Time // time.Now when nil; tests drive a fake clock

	arena []byte
}

// split is the arithmetic progression first, first+stride, … of event
// numbers and the next one to emit.
type split struct{ first, stride, next int64 }

func (sp split) done(events int64) bool { return events > 0 && sp.next >= events }

func (sp split) id() string { return fmt.Sprintf("nexmark-%d-of-%d", sp.first, sp.stride) }

// maxPerEmit bounds one Emit call so checkpoints are not delayed behind it.
const maxPerEmit = 512

// positionSize is the size of a position state item: first, stride, next
// as big-endian uint64s.
const positionSize = 24

// ParseConfig reads the generator settings of a nexmark-source config.
func ParseConfig(cfg sdk.Config) (Config, error) {
	var c Config
	var err error
	if c.FirstEventRate, err = cfg.Float("first-event-rate", 10000); err != nil {
		return c, err
	}
	if !(c.FirstEventRate > 0) {
		return c, fmt.Errorf("nexmark-source: first-event-rate must be positive, got %v", c.FirstEventRate)
	}
	switch v := cfg["base-time"].(type) {
	case nil:
		c.BaseTime = DefaultBaseTime
	case time.Time:
		c.BaseTime = v
	case string:
		if c.BaseTime, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return c, fmt.Errorf("nexmark-source: base-time: %w", err)
		}
	default:
		return c, fmt.Errorf("nexmark-source: base-time: want an RFC 3339 time, got %T", v)
	}
	for _, f := range []struct {
		key string
		dst *int
		def int64
	}{
		{"hot-auction-ratio", &c.HotAuctionRatio, 2},
		{"hot-bidder-ratio", &c.HotBiddersRatio, 4},
		{"hot-seller-ratio", &c.HotSellersRatio, 4},
	} {
		v, err := cfg.Int(f.key, f.def)
		if err != nil {
			return c, err
		}
		if v <= 0 || v > math.MaxInt32 {
			return c, fmt.Errorf("nexmark-source: %s must be in [1, 2^31), got %d", f.key, v)
		}
		*f.dst = int(v)
	}
	return c, c.Validate()
}

func (s *Source) Open(ctx sdk.Context) error {
	cfg := ctx.Config()
	var err error
	if s.gen, err = ParseConfig(cfg); err != nil {
		return err
	}
	if s.events, err = cfg.Int("events", 0); err != nil {
		return err
	}
	rate, err := cfg.Float("rate", 0)
	if err != nil {
		return err
	}
	nsplits, err := cfg.Int("splits", int64(ctx.Parallelism()))
	if err != nil {
		return err
	}
	key, err := cfg.String("key", "kind")
	if err != nil {
		return err
	}
	if s.events < 0 || !(rate >= 0) || math.IsInf(rate, 0) || nsplits <= 0 {
		return fmt.Errorf("nexmark-source: need events >= 0, rate >= 0, splits > 0 (got %d, %v, %d)", s.events, rate, nsplits)
	}
	if key != "kind" && key != "none" {
		return fmt.Errorf("nexmark-source: key must be kind or none, got %q", key)
	}
	s.noKey = key == "none"
	s.position = ctx.ListState("position")
	items := s.position.Get()
	if len(items) == 0 && ctx.RestoredCheckpointID() == 0 {
		p := int64(ctx.Parallelism())
		for f := int64(ctx.SubtaskIndex()); f < nsplits; f += p {
			s.splits = append(s.splits, split{first: f, stride: nsplits, next: f})
		}
	}
	for _, it := range items {
		if len(it) != positionSize {
			return fmt.Errorf("nexmark-source: corrupt position state (%d bytes)", len(it))
		}
		sp := split{
			first:  int64(binary.BigEndian.Uint64(it)),
			stride: int64(binary.BigEndian.Uint64(it[8:])),
			next:   int64(binary.BigEndian.Uint64(it[16:])),
		}
		if sp.stride <= 0 || sp.first < 0 || sp.first >= sp.stride || sp.next < sp.first || (sp.next-sp.first)%sp.stride != 0 {
			return fmt.Errorf("nexmark-source: corrupt position state (split %d/%d at %d)", sp.first, sp.stride, sp.next)
		}
		s.splits = append(s.splits, sp)
	}
	// The stream's rate is shared by the splits: this subtask reads
	// len(splits) of the stride.
	if rate > 0 && len(s.splits) > 0 {
		s.rate = rate * float64(len(s.splits)) / float64(s.splits[0].stride)
	}
	s.cur = len(s.splits) - 1 // the first Emit starts at splits[0]
	return nil
}

func (s *Source) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
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
		// One event is due at the start and one more every 1/rate.
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
		s.outs[s.cur].Collect(s.record(Generate(s.gen, sp.next)))
		sp.next += sp.stride
		s.emitted++
		if sp.done(s.events) {
			if so, ok := out.(sdk.SourceOutput); ok {
				so.ReleaseSplit(sp.id())
			}
		}
	}
	if s.nextSplit() == nil {
		return sdk.SourceStatus{EndOfInput: true}, nil
	}
	// nextSplit advanced cur; step back so the round-robin is unchanged.
	s.cur = (s.cur + len(s.splits) - 1) % len(s.splits)
	return sdk.SourceStatus{}, nil
}

// Kind keys, shared by all records (capped: appending to one reallocates).
var kindKeys = [...][]byte{
	KindPerson:  []byte("person")[:6:6],
	KindAuction: []byte("auction")[:7:7],
	KindBid:     []byte("bid")[:3:3],
}

// arenaChunk is the size of the chunks record values are encoded into.
const arenaChunk = 64 << 10

// record makes e's record, its value encoded into a shared chunk: one
// allocation per chunk rather than per record. A chunk is never written
// again where it handed out bytes, so a value stays valid while downstream
// holds it.
func (s *Source) record(e Event) sdk.Record {
	size := EncodedSize(e)
	if cap(s.arena)-len(s.arena) < size {
		s.arena = make([]byte, 0, max(arenaChunk, size))
	}
	start := len(s.arena)
	s.arena = AppendEncode(s.arena, e)
	r := sdk.Record{Value: s.arena[start:len(s.arena):len(s.arena)], Timestamp: e.DateTime()}
	if !s.noKey {
		r.Key = kindKeys[e.Kind]
	}
	return r
}

// openSplits gives every split with events left its own output, so each
// is a split of the watermark.
func (s *Source) openSplits(out sdk.Collector) {
	s.outs = make([]sdk.Collector, len(s.splits))
	so, ok := out.(sdk.SourceOutput)
	for i, sp := range s.splits {
		s.outs[i] = out
		if ok && !sp.done(s.events) {
			s.outs[i] = so.Split(sp.id())
		}
	}
}

// nextSplit moves to the next split with events left, round-robin; nil
// when every split is exhausted.
func (s *Source) nextSplit() *split {
	for range s.splits {
		s.cur = (s.cur + 1) % len(s.splits)
		if sp := &s.splits[s.cur]; !sp.done(s.events) {
			return sp
		}
	}
	return nil
}

// SnapshotState stores each split's next event number: the runtime calls
// it right after the barrier went out, so every event before the barrier
// is covered.
func (s *Source) SnapshotState(int64) error {
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

func (s *Source) Close() error { return nil }
