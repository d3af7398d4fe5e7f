package window

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/sdk"
)

// IntervalJoinSpec is an interval join's configuration, in milliseconds:
// a left record l joins a right record r of its key when
// l.ts + Lower <= r.ts <= l.ts + Upper.
type IntervalJoinSpec struct {
	Lower, Upper int64
}

// ParseIntervalJoin reads an interval join's configuration: lower and
// upper, Go durations (negative allowed) of whole milliseconds, lower <=
// upper. Its errors name the key. Unknown keys are ignored, as the window
// operator does.
func ParseIntervalJoin(cfg sdk.Config) (IntervalJoinSpec, error) {
	var s IntervalJoinSpec
	var err error
	if s.Lower, err = joinMs(cfg, "lower", false); err != nil {
		return s, err
	}
	if s.Upper, err = joinMs(cfg, "upper", false); err != nil {
		return s, err
	}
	if s.Lower > s.Upper {
		return s, fmt.Errorf(`config "upper": %s is below lower %s (the interval would be empty)`,
			time.Duration(s.Upper)*time.Millisecond, time.Duration(s.Lower)*time.Millisecond)
	}
	return s, nil
}

// WindowJoinSpec is a tumbling window join's configuration: windows of
// Size milliseconds, starting at multiples of Size since the Unix epoch.
type WindowJoinSpec struct {
	Size int64
}

// ParseWindowJoin reads a window join's configuration: size, a positive
// Go duration of whole milliseconds. Its errors name the key.
func ParseWindowJoin(cfg sdk.Config) (WindowJoinSpec, error) {
	size, err := joinMs(cfg, "size", true)
	return WindowJoinSpec{Size: size}, err
}

// joinMs reads the required duration key in milliseconds.
func joinMs(cfg sdk.Config, key string, positive bool) (int64, error) {
	if v, ok := cfg[key]; !ok || v == nil {
		return 0, fmt.Errorf("config %q: required", key)
	}
	d, err := cfg.Duration(key, 0)
	if err != nil {
		return 0, err
	}
	if positive && d <= 0 {
		return 0, fmt.Errorf("config %q: must be positive, got %s", key, d)
	}
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("config %q: must be a whole number of milliseconds, got %s", key, d)
	}
	return d.Milliseconds(), nil
}

// Joins reports whether l.ts + lower <= r.ts <= l.ts + upper, without
// the overflow of the sums at the ends of the int64 range.
func (s IntervalJoinSpec) Joins(lts, rts int64) bool {
	d := rts - lts
	if (rts < 0) != (lts < 0) && (d < 0) != (rts < 0) {
		return false // overflowed: the distance exceeds any bound
	}
	return s.Lower <= d && d <= s.Upper
}
