package nexmarksql

import (
	"strconv"
	"strings"
	"time"
)

// row builds one output line as PostgreSQL's text output and COPY … CSV
// write values, so that the oracles' lines can be compared with a sink's
// byte for byte. It is the oracles' own, kept apart from the engine's row
// formatter (internal/sql/row) on purpose: a shared bug would pass.
type row struct {
	b []byte
	n int // fields so far
}

func (r *row) reset() *row {
	r.b, r.n = r.b[:0], 0
	return r
}

func (r *row) String() string { return string(r.b) }

func (r *row) field() {
	if r.n > 0 {
		r.b = append(r.b, ',')
	}
	r.n++
}

// i64 is an integer of any width.
func (r *row) i64(v int64) *row {
	r.field()
	r.b = strconv.AppendInt(r.b, v, 10)
	return r
}

// num is a NUMERIC of the given scale, unscaled·10^−scale: PostgreSQL
// prints all of the scale's digits, trailing zeros included.
func (r *row) num(unscaled int64, scale int) *row {
	r.field()
	r.b = appendNumeric(r.b, unscaled, scale)
	return r
}

func appendNumeric(b []byte, unscaled int64, scale int) []byte {
	// Through uint64, so the magnitude of MinInt64 survives.
	u := uint64(unscaled)
	if unscaled < 0 {
		b = append(b, '-')
		u = -u
	}
	digits := strconv.FormatUint(u, 10)
	if scale <= 0 {
		return append(b, digits...)
	}
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	b = append(b, digits[:len(digits)-scale]...)
	b = append(b, '.')
	return append(b, digits[len(digits)-scale:]...)
}

// ts is a TIMESTAMP given in milliseconds since the Unix epoch.
func (r *row) ts(ms int64) *row {
	r.field()
	r.b = appendTimestamp(r.b, time.UnixMilli(ms).UTC())
	return r
}

// appendTimestamp writes t as PostgreSQL's ISO DateStyle does: seconds,
// then the microseconds only if any, trailing zeros dropped.
func appendTimestamp(b []byte, t time.Time) []byte {
	b = t.AppendFormat(b, "2006-01-02 15:04:05")
	if us := t.Nanosecond() / 1000; us != 0 {
		frac := strconv.Itoa(1_000_000 + us)[1:]
		b = append(b, '.')
		b = append(b, strings.TrimRight(frac, "0")...)
	}
	return b
}

// text is a VARCHAR, quoted as RFC 4180 and COPY … CSV quote it: when it
// holds a comma, a quote, CR or LF, or is empty (an unquoted empty field
// being NULL).
func (r *row) text(s string) *row {
	r.field()
	if s != "" && !strings.ContainsAny(s, ",\"\r\n") {
		r.b = append(r.b, s...)
		return r
	}
	r.b = append(r.b, '"')
	r.b = append(r.b, strings.ReplaceAll(s, `"`, `""`)...)
	r.b = append(r.b, '"')
	return r
}

func (r *row) null() *row {
	r.field()
	return r
}

func (r *row) boolean(v bool) *row {
	r.field()
	if v {
		r.b = append(r.b, 't')
	} else {
		r.b = append(r.b, 'f')
	}
	return r
}
