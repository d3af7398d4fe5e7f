package row

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/weirproject/weir/internal/sql/plan"
)

// AppendText appends v's text as PostgreSQL prints a value of type t (its
// output function, with DateStyle ISO, IntervalStyle postgres and the
// time zone UTC). NULL appends nothing: how NULL reads is the format's
// business (in CSV, an empty field).
func AppendText(dst []byte, t plan.Type, v Value) []byte {
	if v.IsNull() {
		return dst
	}
	switch t.Kind {
	case plan.Bool:
		if v.Bool() {
			return append(dst, 't')
		}
		return append(dst, 'f')
	case plan.Int16, plan.Int32, plan.Int64:
		return strconv.AppendInt(dst, v.n, 10)
	case plan.Decimal:
		return appendDecimal(dst, v.n, int(t.Scale))
	case plan.Float32:
		return appendFloat(dst, v.Float(), 32)
	case plan.Float64:
		return appendFloat(dst, v.Float(), 64)
	case plan.Varchar:
		return append(dst, v.s...)
	case plan.Date:
		y, bc := civilYear(v.n)
		dst = appendDate(dst, v.n, y)
		return appendEra(dst, bc)
	case plan.Timestamp, plan.TimestampTZ:
		days := floorDiv(v.n, usPerDay)
		y, bc := civilYear(days)
		dst = appendDate(dst, days, y)
		dst = append(dst, ' ')
		dst = appendClock(dst, uint64(v.n-days*usPerDay))
		if t.Kind == plan.TimestampTZ {
			dst = append(dst, "+00"...)
		}
		return appendEra(dst, bc)
	case plan.Interval:
		return appendInterval(dst, v.n)
	}
	return dst
}

// appendDecimal writes mantissa m at scale with all of the scale's
// digits, as PostgreSQL prints NUMERIC.
func appendDecimal(dst []byte, m int64, scale int) []byte {
	// Through uint64, so that MinInt64's magnitude survives.
	u := uint64(m)
	if m < 0 {
		dst = append(dst, '-')
		u = -u
	}
	if scale <= 0 {
		dst = strconv.AppendUint(dst, u, 10)
		if u != 0 {
			for range -scale {
				dst = append(dst, '0')
			}
		}
		return dst
	}
	var buf [20]byte
	digits := strconv.AppendUint(buf[:0], u, 10)
	if len(digits) <= scale {
		dst = append(dst, '0', '.')
		for range scale - len(digits) {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	dst = append(dst, digits[:len(digits)-scale]...)
	dst = append(dst, '.')
	return append(dst, digits[len(digits)-scale:]...)
}

// appendFloat writes f as PostgreSQL 12 and later print float8 and float4
// (extra_float_digits 1): the shortest digits that read back as f, in
// plain notation unless the decimal exponent is below -4 or at least the
// type's precision (15 digits, or 6 for REAL), then as 1.5e+16.
func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, bits)
	i := len(dst) - 1
	for dst[i] != 'e' {
		i--
	}
	exp := 0
	for _, c := range dst[i+2:] {
		exp = exp*10 + int(c-'0')
	}
	if dst[i+1] == '-' {
		exp = -exp
	}
	limit := 15
	if bits == 32 {
		limit = 6
	}
	if exp < -4 || exp >= limit {
		return dst
	}
	return strconv.AppendFloat(dst[:start], f, 'f', -1, bits)
}

const (
	usPerSec = 1_000_000
	usPerDay = 86_400 * usPerSec
)

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// daysFromCivil is the days since 1970-01-01 of a proleptic Gregorian
// date with astronomical year numbering (year 0 is 1 BC): Howard
// Hinnant's days_from_civil.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	doy := (153*((m+9)%12)+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(days int64) (y, m, d int64) {
	z := days + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	y = yoe + era*400
	if m <= 2 {
		y++
	}
	return y, m, d
}

// civilYear is the year of a day as PostgreSQL prints it: years before 1
// AD counted back, with the era.
func civilYear(days int64) (year int64, bc bool) {
	y, _, _ := civilFromDays(days)
	if y <= 0 {
		return 1 - y, true
	}
	return y, false
}

// appendDate writes a day as YYYY-MM-DD, with year as civilYear says.
func appendDate(dst []byte, days, year int64) []byte {
	_, m, d := civilFromDays(days)
	if year < 1000 {
		dst = append(dst, "000"[:4-digitCount(year)]...)
	}
	dst = strconv.AppendInt(dst, year, 10)
	dst = append(dst, '-')
	dst = append2(dst, m)
	dst = append(dst, '-')
	return append2(dst, d)
}

func digitCount(n int64) int {
	c := 1
	for ; n >= 10; n /= 10 {
		c++
	}
	return c
}

func appendEra(dst []byte, bc bool) []byte {
	if bc {
		return append(dst, " BC"...)
	}
	return dst
}

func append2(dst []byte, n int64) []byte {
	return append(dst, byte('0'+n/10), byte('0'+n%10))
}

// appendClock writes a duration under 100 hours as HH:MM:SS, then the
// fraction of a second, if any, without trailing zeros.
func appendClock(dst []byte, us uint64) []byte {
	sec := us / usPerSec
	dst = append2(dst, int64(sec/3600))
	dst = append(dst, ':')
	dst = append2(dst, int64(sec/60%60))
	dst = append(dst, ':')
	dst = append2(dst, int64(sec%60))
	frac := us % usPerSec
	if frac == 0 {
		return dst
	}
	var buf [7]byte
	n := 6
	for frac%10 == 0 {
		frac /= 10
		n--
	}
	for i := n; i > 0; i-- {
		buf[i] = byte('0' + frac%10)
		frac /= 10
	}
	buf[0] = '.'
	return append(dst, buf[:n+1]...)
}

// appendInterval writes an interval as IntervalStyle postgres does, the
// microseconds split into days of 24 hours and a time: "1 day 02:00:00",
// "-1 days -02:00:00", "00:00:10".
func appendInterval(dst []byte, us int64) []byte {
	days, rem := us/usPerDay, us%usPerDay
	if days != 0 {
		dst = strconv.AppendInt(dst, days, 10)
		dst = append(dst, " day"...)
		if days != 1 {
			dst = append(dst, 's')
		}
		if rem == 0 {
			return dst
		}
		dst = append(dst, ' ')
	}
	if rem < 0 {
		dst = append(dst, '-')
		rem = -rem
	}
	return appendClock(dst, uint64(rem))
}

// pgName is a type's name in PostgreSQL's messages.
func pgName(k plan.Kind) string {
	switch k {
	case plan.Bool:
		return "boolean"
	case plan.Int16:
		return "smallint"
	case plan.Int32:
		return "integer"
	case plan.Int64:
		return "bigint"
	case plan.Float32:
		return "real"
	case plan.Float64:
		return "double precision"
	case plan.Decimal:
		return "numeric"
	case plan.Varchar:
		return "character varying"
	case plan.Date:
		return "date"
	case plan.Timestamp:
		return "timestamp"
	case plan.TimestampTZ:
		return "timestamp with time zone"
	case plan.Interval:
		return "interval"
	}
	return strings.ToLower(k.String())
}

// ErrNumericOverflow is a NUMERIC value whose mantissa does not fit 64
// bits at its type's scale.
var ErrNumericOverflow = errors.New("numeric field overflow")

var (
	errSyntax = errors.New("syntax")
	errRange  = errors.New("range")
)

func syntaxError(k plan.Kind, s string) error {
	return fmt.Errorf("invalid input syntax for type %s: %q", pgName(k), s)
}

// ParseText reads a value of type t from text: what AppendText writes,
// and the other usual spellings — booleans t/f/true/false/yes/no/on/off/
// 1/0; numbers with an exponent; dates and timestamps as 2024-01-01,
// 2024-01-01 00:00:00.5 or 2024-01-01T00:00:00Z, with an optional zone
// offset (Z, UTC, +02, +05:30) and era (BC); intervals as "1 day
// 02:00:00", "00:00:10", "10 seconds", "1.5 hours 3 min", "… ago" or
// ISO 8601's PT10S. A zone offset moves TIMESTAMP and TIMESTAMPTZ values
// alike to UTC (PostgreSQL ignores it for TIMESTAMP) and is ignored for
// DATE. A NUMERIC with more digits than its scale rounds half away from
// zero. The errors are PostgreSQL's: invalid input syntax for type
// bigint: "x".
func ParseText(t plan.Type, s string) (Value, error) {
	switch t.Kind {
	case plan.Varchar:
		return Str(s), nil
	case plan.Bool:
		return parseBool(s)
	case plan.Int16, plan.Int32, plan.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			return Value{}, syntaxError(t.Kind, s)
		case err != nil || !fits(t.Kind, n):
			return Value{}, fmt.Errorf("value %q is out of range for type %s", s, pgName(t.Kind))
		}
		return Int(n), nil
	case plan.Decimal:
		m, _, err := parseDecimal(strings.TrimSpace(s), int(t.Scale))
		if err == errSyntax {
			return Value{}, syntaxError(t.Kind, s)
		}
		return Int(m), err
	case plan.Float32, plan.Float64:
		bits := 64
		if t.Kind == plan.Float32 {
			bits = 32
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(s), bits)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return Value{}, fmt.Errorf("%q is out of range for type %s", s, pgName(t.Kind))
			}
			return Value{}, syntaxError(t.Kind, s)
		}
		return Float(f), nil
	case plan.Date, plan.Timestamp, plan.TimestampTZ:
		days, us, err := parseDateTime(s)
		switch {
		case err == errRange:
			return Value{}, fmt.Errorf("date/time field value out of range: %q", s)
		case err != nil:
			return Value{}, syntaxError(t.Kind, s)
		case t.Kind == plan.Date:
			return Int(days), nil
		}
		return Int(us), nil
	case plan.Interval:
		us, err := parseInterval(s)
		switch {
		case err == errSyntax:
			return Value{}, syntaxError(t.Kind, s)
		case err == errRange:
			return Value{}, fmt.Errorf("interval out of range: %q", s)
		case err != nil:
			return Value{}, fmt.Errorf("interval %q: %w", s, err)
		}
		return Int(us), nil
	}
	return Value{}, fmt.Errorf("cannot read a value of type %s from text", t)
}

func parseBool(s string) (Value, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "t", "true", "y", "yes", "on", "1":
		return Bool(true), nil
	case "f", "false", "n", "no", "off", "0":
		return Bool(false), nil
	}
	return Value{}, syntaxError(plan.Bool, s)
}

// parseDecimal reads a number (sign, digits, point, exponent) as a
// mantissa at scale, rounding half away from zero; exact says no digit
// other than 0 was rounded off. Errors: errSyntax, ErrNumericOverflow.
func parseDecimal(s string, scale int) (m int64, exact bool, err error) {
	i, neg := 0, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	intStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(s) && s[i] == '.' {
		i++
		fracStart = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		fracEnd = i
	}
	nInt, nFrac := intEnd-intStart, fracEnd-fracStart
	if nInt+nFrac == 0 {
		return 0, false, errSyntax
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		if i == len(s) {
			return 0, false, errSyntax
		}
		for ; i < len(s) && isDigit(s[i]); i++ {
			// Beyond a million the value is 0 or an overflow anyway.
			if exp < 1_000_000 {
				exp = exp*10 + int(s[i]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return 0, false, errSyntax
	}
	// The digits D (integer part, then fraction) times 10^k are the
	// mantissa: keep D's first nd+k digits when k < 0 and round by the
	// next.
	digit := func(j int) uint64 {
		if j < nInt {
			return uint64(s[intStart+j] - '0')
		}
		return uint64(s[fracStart+j-nInt] - '0')
	}
	nd := nInt + nFrac
	k := exp - nFrac + scale
	keep := nd
	if k < 0 {
		keep = nd + k
	}
	var u uint64
	for j := 0; j < keep && j < nd; j++ {
		d := digit(j)
		if u > (math.MaxUint64-d)/10 {
			return 0, false, ErrNumericOverflow
		}
		u = u*10 + d
	}
	exact = true
	for j := max(keep, 0); j < nd; j++ {
		exact = exact && digit(j) == 0
	}
	if k > 0 && u != 0 {
		for range k {
			if u > math.MaxUint64/10 {
				return 0, false, ErrNumericOverflow
			}
			u *= 10
		}
	}
	if keep >= 0 && keep < nd && digit(keep) >= 5 {
		if u == math.MaxUint64 {
			return 0, false, ErrNumericOverflow
		}
		u++
	}
	if u > math.MaxInt64 && !(neg && u == 1<<63) {
		return 0, false, ErrNumericOverflow
	}
	if neg {
		return -int64(u), exact, nil
	}
	return int64(u), exact, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// fits reports whether n is in the range of integer kind k.
func fits(k plan.Kind, n int64) bool {
	switch k {
	case plan.Int16:
		return n == int64(int16(n))
	case plan.Int32:
		return n == int64(int32(n))
	}
	return true
}
