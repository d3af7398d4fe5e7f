package window

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Acc is the accumulator of every aggregate at once: count, sum, min and
// max of the values folded in. One layout for all keeps state readable
// whatever the aggregate, and costs a few bytes per pane.
type Acc struct {
	Count, Sum, Min, Max int64
}

// Add folds one value in.
func (a *Acc) Add(v int64) {
	if a.Count == 0 || v < a.Min {
		a.Min = v
	}
	if a.Count == 0 || v > a.Max {
		a.Max = v
	}
	a.Count++
	a.Sum += v
}

// Merge folds another accumulator in.
func (a *Acc) Merge(b Acc) {
	if b.Count == 0 {
		return
	}
	if a.Count == 0 || b.Min < a.Min {
		a.Min = b.Min
	}
	if a.Count == 0 || b.Max > a.Max {
		a.Max = b.Max
	}
	a.Count += b.Count
	a.Sum += b.Sum
}

// AppendResult appends the aggregate's result in decimal: avg is the exact
// quotient, written with as few digits as it takes.
func (a Acc) AppendResult(dst []byte, agg Aggregate) []byte {
	switch agg {
	case Count:
		return strconv.AppendInt(dst, a.Count, 10)
	case Sum:
		return strconv.AppendInt(dst, a.Sum, 10)
	case Min:
		return strconv.AppendInt(dst, a.Min, 10)
	case Max:
		return strconv.AppendInt(dst, a.Max, 10)
	case Avg:
		if a.Count == 0 {
			return append(dst, '0')
		}
		return strconv.AppendFloat(dst, float64(a.Sum)/float64(a.Count), 'f', -1, 64)
	}
	return dst
}

// AppendBinary appends the accumulator's state encoding.
func (a Acc) AppendBinary(dst []byte) ([]byte, error) {
	dst = binary.AppendVarint(dst, a.Count)
	dst = binary.AppendVarint(dst, a.Sum)
	dst = binary.AppendVarint(dst, a.Min)
	return binary.AppendVarint(dst, a.Max), nil
}

// UnmarshalBinary reads what AppendBinary wrote.
func (a *Acc) UnmarshalBinary(b []byte) error {
	var vals [4]int64
	for i := range vals {
		v, n := binary.Varint(b)
		if n <= 0 {
			return fmt.Errorf("window: corrupt accumulator")
		}
		vals[i], b = v, b[n:]
	}
	if len(b) != 0 {
		return fmt.Errorf("window: corrupt accumulator: %d trailing bytes", len(b))
	}
	a.Count, a.Sum, a.Min, a.Max = vals[0], vals[1], vals[2], vals[3]
	return nil
}

// TimeKey encodes a timestamp so that byte order is time order: big endian
// with the sign bit flipped.
func TimeKey(dst []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(ts)^(1<<63))
}

// ParseTimeKey reads what TimeKey wrote.
func ParseTimeKey(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("window: corrupt time key (%d bytes)", len(b))
	}
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)), nil
}
