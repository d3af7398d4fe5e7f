package nexmark

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/weirproject/weir/internal/splitsource"
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
//	us-states         the states people live in (Config.USStates), a
//	                  list or a comma-separated string (default AZ, CA,
//	                  ID, OR, WA, WY)
//	key               kind (default) or none
//	kinds             the kinds emitted, a list of person, auction, bid
//	                  (default all; as the Nexmark suites' person, auction
//	                  and bid views of the event table)
//	format            binary (default: Encode) or csv (the fields in the
//	                  order of the struct, comma-separated, as text)
//
// The stream is cut into splits as splitsource describes: event n belongs
// to split n mod splits and split s is read by subtask s mod parallelism
// of the first run. Each split's next event number is an item of operator
// list state, so a restore resumes every split exactly after the last event
// that preceded the checkpoint's barrier, and a restore at another
// parallelism hands the splits round-robin to the new subtasks. The
// configured splits matter only to the first run: a restored job keeps the
// splits of its state. Each split is a split of the watermark, whose event
// times increase with n.
type Source struct {
	gen    Config
	events int64
	noKey  bool
	skip   [KindBid + 1]bool // kinds not emitted
	csv    bool
	// reader holds the splits and their positions and paces the events.
	reader splitsource.Reader
	// Make, when set, makes an event's record instead of the kind key and
	// encoded value: the Go API's typed Nexmark source.
	Make func(e Event) sdk.Record

	arena []byte
}

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
	if c.USStates, err = parseStates(cfg["us-states"]); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// parseStates reads the us-states config: a list of strings, or one string
// of them comma-separated (as SQL's nexmark.us.states = 'az,ca'), each
// trimmed of spaces; absent is nil, the default.
func parseStates(v any) ([]string, error) {
	var list []string
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		list = strings.Split(v, ",")
	case []string:
		list = append(list, v...)
	case []any:
		for _, s := range v {
			s, ok := s.(string)
			if !ok {
				return nil, fmt.Errorf("nexmark-source: us-states: want a list of strings, got %v", v)
			}
			list = append(list, s)
		}
	default:
		return nil, fmt.Errorf("nexmark-source: us-states: want a list of states or a comma-separated string, got %T", v)
	}
	for i, s := range list {
		if list[i] = strings.TrimSpace(s); list[i] == "" {
			return nil, fmt.Errorf("nexmark-source: us-states: an empty state in %v", v)
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("nexmark-source: us-states: an empty list")
	}
	return list, nil
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
	format, err := cfg.String("format", "binary")
	if err != nil {
		return err
	}
	if format != "binary" && format != "csv" {
		return fmt.Errorf("nexmark-source: format must be binary or csv, got %q", format)
	}
	s.csv = format == "csv"
	if s.skip, err = parseKinds(cfg["kinds"]); err != nil {
		return err
	}
	if err := s.reader.Open(ctx, "nexmark", s.events, nsplits); err != nil {
		return err
	}
	// The stream's rate is shared by the splits: this subtask reads
	// len(splits) of the stride.
	s.reader.SetRate(s.reader.Share(rate))
	return nil
}

func (s *Source) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	return s.reader.Emit(out, s.event), nil
}

// event collects event n's record, if its kind is emitted.
func (s *Source) event(n int64, out sdk.Collector) {
	if s.skip[KindOf(n)] {
		return
	}
	e := Generate(s.gen, n)
	if s.Make != nil {
		out.Collect(s.Make(e))
		return
	}
	out.Collect(s.record(e))
}

// parseKinds reads the kinds config: the kinds not listed are skipped.
func parseKinds(v any) (skip [KindBid + 1]bool, err error) {
	if v == nil {
		return skip, nil
	}
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return skip, fmt.Errorf("nexmark-source: kinds: want a non-empty list of person, auction, bid; got %v", v)
	}
	skip = [KindBid + 1]bool{KindPerson: true, KindAuction: true, KindBid: true}
	for _, k := range list {
		switch k {
		case "person":
			skip[KindPerson] = false
		case "auction":
			skip[KindAuction] = false
		case "bid":
			skip[KindBid] = false
		default:
			return skip, fmt.Errorf("nexmark-source: kinds: unknown kind %v (want person, auction or bid)", k)
		}
	}
	return skip, nil
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
	// A CSV line is longer than the encoding by at most the digits of its
	// numbers: 20 bytes for each of at most 10 fields.
	size := EncodedSize(e)
	if s.csv {
		size += 200
	}
	if cap(s.arena)-len(s.arena) < size {
		s.arena = make([]byte, 0, max(arenaChunk, size))
	}
	start := len(s.arena)
	if s.csv {
		s.arena = AppendCSV(s.arena, e)
	} else {
		s.arena = AppendEncode(s.arena, e)
	}
	r := sdk.Record{Value: s.arena[start:len(s.arena):len(s.arena)], Timestamp: e.DateTime()}
	if !s.noKey {
		r.Key = kindKeys[e.Kind]
	}
	return r
}

// SnapshotState stores each split's next event number: the runtime calls
// it right after the barrier went out, so every event before the barrier
// is covered.
func (s *Source) SnapshotState(int64) error {
	s.reader.Snapshot()
	return nil
}

func (s *Source) Close() error { return nil }
