// Package window holds the arithmetic of keyed windows, free of state and
// I/O: a window spec read from an operator's configuration, the panes a
// record falls in, the windows a pane belongs to, and the accumulators
// folded per pane and merged per window.
//
// Tumbling and sliding windows share panes (Arroyo's and Flink's "sliced"
// windows): time is cut into panes of gcd(size, slide), a record is folded
// once into its pane, and a window's result merges the size/pane panes it
// covers. A record therefore costs one fold whatever size/slide is, where
// assigning it to every window it belongs to costs size/slide folds.
// Windows start at multiples of their slide since the Unix epoch, as in
// Flink (no offset).
package window

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/sdk"
)

// Kind is the window shape.
type Kind uint8

const (
	Tumbling Kind = iota + 1
	Sliding
	Session
)

func (k Kind) String() string {
	switch k {
	case Tumbling:
		return "tumbling"
	case Sliding:
		return "sliding"
	case Session:
		return "session"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Aggregate is what a window computes over its records' values.
type Aggregate uint8

const (
	Count Aggregate = iota + 1
	Sum
	Min
	Max
	Avg
)

var aggregateNames = map[string]Aggregate{"count": Count, "sum": Sum, "min": Min, "max": Max, "avg": Avg}

func (a Aggregate) String() string {
	for n, v := range aggregateNames {
		if v == a {
			return n
		}
	}
	return fmt.Sprintf("aggregate(%d)", uint8(a))
}

// Spec is a window operator's configuration. Durations are milliseconds.
type Spec struct {
	Kind Kind
	// Size is the length of a tumbling or sliding window; Slide how far
	// apart sliding windows start (Size for tumbling); Gap the inactivity
	// that closes a session.
	Size, Slide, Gap int64
	Aggregate        Aggregate
	// Lateness is how long after a window's end (by the watermark) a late
	// record still updates it, firing it again.
	Lateness int64
	// ProcessingTime: windows follow the wall clock, not the records'
	// timestamps.
	ProcessingTime bool
}

// Parse reads a window spec from an operator configuration: type, size,
// slide, gap, aggregate, allowed-lateness, time. Its errors name the key.
func Parse(cfg sdk.Config) (Spec, error) {
	var s Spec
	typ, err := cfg.String("type", "")
	if err != nil {
		return s, err
	}
	switch typ {
	case "tumbling":
		s.Kind = Tumbling
	case "sliding":
		s.Kind = Sliding
	case "session":
		s.Kind = Session
	case "":
		return s, fmt.Errorf(`config "type": required (tumbling, sliding or session)`)
	default:
		return s, fmt.Errorf(`config "type": unknown window type %q (want tumbling, sliding or session)`, typ)
	}
	ms := func(key string, present bool) (int64, error) {
		d, err := cfg.Duration(key, 0)
		if err != nil {
			return 0, err
		}
		if !present {
			return 0, nil
		}
		if d <= 0 {
			return 0, fmt.Errorf("config %q: must be positive, got %s", key, d)
		}
		if d%time.Millisecond != 0 {
			return 0, fmt.Errorf("config %q: must be a whole number of milliseconds, got %s", key, d)
		}
		return d.Milliseconds(), nil
	}
	has := func(key string) bool { v, ok := cfg[key]; return ok && v != nil }
	switch s.Kind {
	case Tumbling, Sliding:
		if !has("size") {
			return s, fmt.Errorf(`config "size": required for a %s window`, s.Kind)
		}
		if s.Size, err = ms("size", true); err != nil {
			return s, err
		}
		if has("gap") {
			return s, fmt.Errorf(`config "gap": only session windows have a gap`)
		}
		s.Slide = s.Size
		if s.Kind == Sliding {
			if !has("slide") {
				return s, fmt.Errorf(`config "slide": required for a sliding window`)
			}
			if s.Slide, err = ms("slide", true); err != nil {
				return s, err
			}
			if s.Slide > s.Size {
				return s, fmt.Errorf(`config "slide": %s exceeds the window size %s (records between windows would belong to none)`,
					time.Duration(s.Slide)*time.Millisecond, time.Duration(s.Size)*time.Millisecond)
			}
		} else if has("slide") {
			return s, fmt.Errorf(`config "slide": only sliding windows have a slide`)
		}
	case Session:
		if !has("gap") {
			return s, fmt.Errorf(`config "gap": required for a session window`)
		}
		if s.Gap, err = ms("gap", true); err != nil {
			return s, err
		}
		if has("size") || has("slide") {
			return s, fmt.Errorf(`config "size": session windows have a gap, not a size or slide`)
		}
	}
	agg, err := cfg.String("aggregate", "count")
	if err != nil {
		return s, err
	}
	var ok bool
	if s.Aggregate, ok = aggregateNames[agg]; !ok {
		return s, fmt.Errorf(`config "aggregate": unknown aggregate %q (want count, sum, min, max or avg)`, agg)
	}
	lateness, err := cfg.Duration("allowed-lateness", 0)
	if err != nil {
		return s, err
	}
	if lateness < 0 || lateness%time.Millisecond != 0 {
		return s, fmt.Errorf(`config "allowed-lateness": must be a non-negative whole number of milliseconds, got %s`, lateness)
	}
	s.Lateness = lateness.Milliseconds()
	tm, err := cfg.String("time", "event")
	if err != nil {
		return s, err
	}
	switch tm {
	case "event":
	case "processing":
		s.ProcessingTime = true
		if s.Lateness > 0 {
			return s, fmt.Errorf(`config "allowed-lateness": processing-time windows have no late records`)
		}
	default:
		return s, fmt.Errorf(`config "time": unknown time %q (want event or processing)`, tm)
	}
	return s, nil
}

// Pane is the length of the panes of a tumbling or sliding window.
func (s Spec) Pane() int64 { return gcd(s.Size, s.Slide) }

// PaneStart is the start of the pane holding timestamp ts.
func (s Spec) PaneStart(ts int64) int64 { return floorTo(ts, s.Pane()) }

// FirstEnd is the end of the earliest window holding the pane starting at
// p: the window starting at the first multiple of the slide above
// p + pane − size.
func (s Spec) FirstEnd(p int64) int64 {
	return ceilTo(p+s.Pane()-s.Size, s.Slide) + s.Size
}

// LastEnd is the end of the latest window holding the pane starting at p.
func (s Spec) LastEnd(p int64) int64 { return floorTo(p, s.Slide) + s.Size }

// MaxTimestamp is the last instant of a window ending at end (Flink's
// window.maxTimestamp()): its timer fires when the watermark reaches it.
func MaxTimestamp(end int64) int64 { return end - 1 }

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// floorTo rounds ts down to a multiple of m, negative ts included.
func floorTo(ts, m int64) int64 {
	r := ts % m
	if r < 0 {
		r += m
	}
	return ts - r
}

func ceilTo(ts, m int64) int64 { return -floorTo(-ts, m) }
