package row

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/weirproject/weir/internal/sql/plan"
)

// Codec reads and writes the binary row format (plan.FormatRow) of one
// schema: a bitmap of the NULL columns, (n+7)/8 bytes with bit i%8 of
// byte i/8 set when column i is NULL and the unused bits zero; then each
// non-NULL column in order — a signed varint for the integer-like kinds
// (integers, NUMERIC's mantissa, DATE, TIMESTAMP, TIMESTAMPTZ,
// INTERVAL), 8 little-endian bytes for DOUBLE PRECISION, 4 for REAL, one
// byte 0 or 1 for BOOLEAN, a uvarint length and the bytes for VARCHAR.
// Columns of the NULL type are always NULL. A Codec is safe for
// concurrent use.
type Codec struct {
	kinds []plan.Kind
}

// NewCodec is the codec of rows of schema s.
func NewCodec(s plan.Schema) *Codec {
	c := &Codec{kinds: make([]plan.Kind, len(s))}
	for i, col := range s {
		c.kinds[i] = col.Type.Kind
	}
	return c
}

// Append appends r, which has the schema's columns, to dst.
func (c *Codec) Append(dst []byte, r Row) []byte {
	off := len(dst)
	dst = append(dst, make([]byte, (len(c.kinds)+7)/8)...)
	for i, k := range c.kinds {
		if r[i].IsNull() || k == plan.Null {
			dst[off+i/8] |= 1 << (i % 8)
			continue
		}
		dst = appendBinary(dst, k, r[i])
	}
	return dst
}

// AppendKey appends the row encoding of r's columns cols, in that order:
// what Append writes for a row of just those columns, except that a float
// zero is always +0 and a NaN always the same NaN, so that values SQL
// finds equal have equal keys. The key decodes with the Codec of the
// columns' schema.
func (c *Codec) AppendKey(dst []byte, r Row, cols []int) []byte {
	off := len(dst)
	dst = append(dst, make([]byte, (len(cols)+7)/8)...)
	for i, col := range cols {
		k, v := c.kinds[col], r[col]
		if v.IsNull() || k == plan.Null {
			dst[off+i/8] |= 1 << (i % 8)
			continue
		}
		if k == plan.Float32 || k == plan.Float64 {
			switch f := v.Float(); {
			case f == 0:
				v = Float(0)
			case f != f:
				v = Float(math.NaN())
			}
		}
		dst = appendBinary(dst, k, v)
	}
	return dst
}

func appendBinary(dst []byte, k plan.Kind, v Value) []byte {
	switch k {
	case plan.Bool:
		return append(dst, byte(v.n&1))
	case plan.Float32:
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(v.Float())))
	case plan.Float64:
		return binary.LittleEndian.AppendUint64(dst, uint64(v.n))
	case plan.Varchar:
		dst = binary.AppendUvarint(dst, uint64(len(v.s)))
		return append(dst, v.s...)
	}
	return binary.AppendVarint(dst, v.n)
}

var errTruncated = errors.New("truncated")

// Decode decodes the row b holds into r, reusing r's array when it has
// the room, and returns it. The VARCHAR values do not alias b, which the
// caller may reuse: they are substrings of one string copied from b per
// row, so one allocation serves all of a row's strings (and a string kept
// keeps the row's others alive with it). Corrupt input is an error, and
// leaves r's values unspecified.
func (c *Codec) Decode(b []byte, r Row) (Row, error) {
	n := len(c.kinds)
	if cap(r) >= n {
		r = r[:n]
	} else {
		r = make(Row, n)
	}
	p := (n + 7) / 8
	if len(b) < p {
		return r, fmt.Errorf("row: null bitmap of %d columns: %w", n, errTruncated)
	}
	if n%8 != 0 && b[p-1]>>(n%8) != 0 {
		return r, errors.New("row: null bitmap: bits set beyond the last column")
	}
	// Strings are located in a first pass (each Value holding its length
	// prefix's offset) and copied out in a second, all at once.
	first, last := -1, 0
	for i, k := range c.kinds {
		if b[i/8]&(1<<(i%8)) != 0 {
			r[i] = Value{}
			continue
		}
		var err error
		start := p
		switch k {
		case plan.Null:
			err = errors.New("a value in a column of the NULL type")
		case plan.Bool:
			if p >= len(b) {
				err = errTruncated
			} else if b[p] > 1 {
				err = fmt.Errorf("boolean byte %d", b[p])
			} else {
				r[i] = Bool(b[p] == 1)
				p++
			}
		case plan.Float32:
			if len(b)-p < 4 {
				err = errTruncated
			} else {
				r[i] = Float(float64(math.Float32frombits(binary.LittleEndian.Uint32(b[p:]))))
				p += 4
			}
		case plan.Float64:
			if len(b)-p < 8 {
				err = errTruncated
			} else {
				r[i] = Value{n: int64(binary.LittleEndian.Uint64(b[p:])), valid: true}
				p += 8
			}
		case plan.Varchar:
			l, m := binary.Uvarint(b[p:])
			if m <= 0 || l > uint64(len(b)-p-m) {
				err = errTruncated
			} else {
				r[i] = Value{n: int64(p), valid: true}
				p += m + int(l)
				if first < 0 {
					first = start + m
				}
				last = p
			}
		default:
			x, m := binary.Varint(b[p:])
			if m <= 0 {
				err = errTruncated
			} else if (k == plan.Int16 && x != int64(int16(x))) || (k == plan.Int32 && x != int64(int32(x))) {
				err = fmt.Errorf("%d out of range", x)
			} else {
				r[i] = Int(x)
				p += m
			}
		}
		if err != nil {
			return r, fmt.Errorf("row: column %d (%s) at byte %d: %w", i, k, start, err)
		}
	}
	if p != len(b) {
		return r, fmt.Errorf("row: %d bytes after the last column", len(b)-p)
	}
	if first < 0 {
		return r, nil
	}
	all := string(b[first:last])
	for i, k := range c.kinds {
		if k != plan.Varchar || r[i].IsNull() {
			continue
		}
		at := int(r[i].n)
		l, m := binary.Uvarint(b[at:])
		s := at + m - first
		r[i] = Str(all[s : s+int(l)])
	}
	return r, nil
}
