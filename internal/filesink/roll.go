package filesink

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir/sdk"
)

// rollPolicy says when file-sink closes a part file, as Flink's FileSink
// rolling policies do. Zero limits are no limit.
type rollPolicy struct {
	maxSize      int64
	maxAge       time.Duration
	onCheckpoint bool
}

// Defaults of max-size and max-age when on-checkpoint is false, so that
// every part file is closed eventually (Flink's DefaultRollingPolicy).
const (
	defaultRollMaxSize = 128 << 20
	defaultRollMaxAge  = 60 * time.Second
)

var rollKeys = []string{"max-size", "max-age", "on-checkpoint"}

// parseRoll reads the roll mapping of file-sink's config: max-size (bytes,
// or a size like "64MiB"), max-age (a Go duration) and on-checkpoint
// (default true). Without roll, or with on-checkpoint alone, a part file
// is closed at every checkpoint and only then (the default); with
// on-checkpoint: false, a limit left unset is 128MiB or 60s.
func parseRoll(cfg sdk.Config) (rollPolicy, error) {
	p := rollPolicy{onCheckpoint: true}
	sub, err := cfg.Sub("roll")
	if err != nil {
		return p, fmt.Errorf("file-sink: %w", err)
	}
	if sub == nil {
		return p, nil
	}
	for k := range sub {
		if !slices.Contains(rollKeys, k) {
			return p, fmt.Errorf("file-sink: config roll.%s: unknown key (want %s)", k, strings.Join(rollKeys, ", "))
		}
	}
	if v, ok := sub["max-size"]; ok && v != nil {
		if p.maxSize, err = parseSize(v); err != nil {
			return p, fmt.Errorf("file-sink: config roll.max-size: %w", err)
		}
	}
	if v, ok := sub["max-age"]; ok && v != nil {
		s, isString := v.(string)
		if !isString {
			return p, fmt.Errorf("file-sink: config roll.max-age: want a duration like \"60s\", got %T", v)
		}
		if p.maxAge, err = time.ParseDuration(s); err != nil {
			return p, fmt.Errorf("file-sink: config roll.max-age: %w", err)
		}
		if p.maxAge <= 0 {
			return p, fmt.Errorf("file-sink: config roll.max-age: %s is not positive", s)
		}
	}
	if v, ok := sub["on-checkpoint"]; ok && v != nil {
		switch b := v.(type) {
		case bool:
			p.onCheckpoint = b
		case string:
			if p.onCheckpoint, err = strconv.ParseBool(b); err != nil {
				return p, fmt.Errorf("file-sink: config roll.on-checkpoint: want true or false, got %q", b)
			}
		default:
			return p, fmt.Errorf("file-sink: config roll.on-checkpoint: want true or false, got %T", v)
		}
	}
	if !p.onCheckpoint {
		if p.maxSize == 0 {
			p.maxSize = defaultRollMaxSize
		}
		if p.maxAge == 0 {
			p.maxAge = defaultRollMaxAge
		}
	}
	return p, nil
}

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// parseSize reads a positive byte count: a number, or a string of a
// number and a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; any case).
func parseSize(v any) (int64, error) {
	var n float64
	switch x := v.(type) {
	case float64:
		n = x
	case int:
		n = float64(x)
	case int64:
		n = float64(x)
	case string:
		s := strings.TrimSpace(x)
		i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i < 0 {
			i = len(s)
		}
		num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
		mult, ok := sizeUnits[unit]
		f, err := strconv.ParseFloat(num, 64)
		if !ok || err != nil {
			return 0, fmt.Errorf("%q is not a size (want bytes, or a number with B, KB, MB, GB, TB, KiB, MiB, GiB or TiB, like \"64MiB\")", x)
		}
		n = f * mult
	default:
		return 0, fmt.Errorf("want a size like \"64MiB\" or a number of bytes, got %T", v)
	}
	if n < 1 || n > math.MaxInt64/2 || math.IsNaN(n) {
		return 0, fmt.Errorf("%v is not a positive size that fits", v)
	}
	return int64(n), nil
}
