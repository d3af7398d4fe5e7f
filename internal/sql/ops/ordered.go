package ops

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// The order-preserving encoding of SQL values, whose byte order is the
// values' SQL order: a TopN's sort keys and the min/max of an aggregate
// over a changelog keep their rows in map state under it, so that the
// state's iteration in key order is the SQL order.

// appendOrdered appends an encoding of v whose byte order is SQL's
// order of the values (compareEncoded's): integers and everything in an
// int64 but floats as 8 big-endian bytes with the sign bit flipped;
// floats as the 8 big-endian bytes of their bits, all flipped for a
// negative number and the sign bit for a positive one (zero as +0 and
// NaN as one NaN, above +Inf); a BOOLEAN as 0 or 1; a VARCHAR as its
// bytes with each 0 escaped as 0 0xff, then 0 1.
func appendOrdered(dst []byte, k plan.Kind, v row.Value) []byte {
	switch k {
	case plan.Float32, plan.Float64:
		f := v.Float()
		switch {
		case f == 0:
			f = 0
		case f != f:
			f = math.NaN()
		}
		u := math.Float64bits(f)
		if u>>63 == 1 {
			u = ^u
		} else {
			u |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(dst, u)
	case plan.Bool:
		if v.Bool() {
			return append(dst, 1)
		}
		return append(dst, 0)
	case plan.Varchar:
		s := v.Str()
		for {
			i := strings.IndexByte(s, 0)
			if i < 0 {
				break
			}
			dst = append(append(dst, s[:i]...), 0, 0xff)
			s = s[i+1:]
		}
		return append(append(dst, s...), 0, 1)
	}
	return binary.BigEndian.AppendUint64(dst, uint64(v.Int())^(1<<63))
}

// decodeOrdered is the value appendOrdered encoded as b, all of it.
func decodeOrdered(k plan.Kind, b []byte) (row.Value, error) {
	switch k {
	case plan.Float32, plan.Float64:
		if len(b) != 8 {
			return row.Value{}, errCorruptAcc
		}
		u := binary.BigEndian.Uint64(b)
		if u>>63 == 1 {
			u &^= 1 << 63
		} else {
			u = ^u
		}
		return row.Float(math.Float64frombits(u)), nil
	case plan.Bool:
		if len(b) != 1 || b[0] > 1 {
			return row.Value{}, errCorruptAcc
		}
		return row.Bool(b[0] == 1), nil
	case plan.Varchar:
		var s []byte
		for {
			i := bytes.IndexByte(b, 0)
			if i < 0 || i+1 >= len(b) {
				return row.Value{}, errCorruptAcc
			}
			s = append(s, b[:i]...)
			switch b[i+1] {
			case 0xff:
				s = append(s, 0)
				b = b[i+2:]
				continue
			case 1:
				if i+2 != len(b) {
					return row.Value{}, errCorruptAcc
				}
				return row.Str(string(s)), nil
			}
			return row.Value{}, errCorruptAcc
		}
	}
	if len(b) != 8 {
		return row.Value{}, errCorruptAcc
	}
	return row.Int(int64(binary.BigEndian.Uint64(b) ^ (1 << 63))), nil
}
