package expr

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// timeArg is the type a function of a time takes for an argument of type
// a: a DATE as a TIMESTAMP, NULL as a TIMESTAMP; ok is false for a type
// that is not a time (nor, with intervals set, an interval).
func timeArg(a plan.Type, intervals bool) (plan.Type, bool) {
	switch {
	case a.Kind == plan.Date, a.Kind == plan.Null:
		return timestamp, true
	case isTimestamp(a.Kind), intervals && a.Kind == plan.Interval:
		return a, true
	}
	return a, false
}

// resolveDateTrunc types date_trunc(field, x): x's type (a DATE's as a
// TIMESTAMP).
func resolveDateTrunc(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) == 2 && (args[0].Kind == plan.Varchar || args[0].Kind == plan.Null) {
		if t, ok := timeArg(args[1], true); ok {
			return []plan.Type{varchar, t}, t, nil
		}
	}
	return nil, plan.Type{}, undefined(fn, args)
}

// timeUnits are the microseconds of the units date_trunc truncates to by
// division.
var timeUnits = map[string]int64{
	"microseconds": 1, "milliseconds": 1000, "second": 1_000_000, "minute": 60_000_000,
	"hour": 3_600_000_000, "day": usPerDay,
}

// unitName is a field name's canonical form: lower case, singular
// (PostgreSQL takes both).
func unitName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "microsecond", "microseconds", "us":
		return "microseconds"
	case "millisecond", "milliseconds", "ms":
		return "milliseconds"
	case "millennia", "millenniums":
		return "millennium"
	case "centuries":
		return "century"
	}
	return strings.TrimSuffix(s, "s")
}

func compileDateTrunc(c *call) (Eval, error) {
	if v, ok := c.constArg(0); ok && !v.IsNull() {
		trunc, err := truncator(v.Str(), c.types[1])
		if err != nil {
			return nil, err
		}
		return unary(c.evals[1], func(x row.Value) (row.Value, error) { return trunc(x.Int()) }), nil
	}
	return binary(c.evals[0], c.evals[1], func(f, x row.Value) (row.Value, error) {
		trunc, err := truncator(f.Str(), c.types[1])
		if err != nil {
			return row.Value{}, err
		}
		return trunc(x.Int())
	}), nil
}

// truncator truncates a value of type t (µs) to field.
func truncator(field string, t plan.Type) (func(us int64) (row.Value, error), error) {
	unit := unitName(field)
	if d, ok := timeUnits[unit]; ok {
		if t.Kind == plan.Interval {
			return func(us int64) (row.Value, error) { return row.Int(us - us%d), nil }, nil
		}
		return func(us int64) (row.Value, error) { return row.Int(floorDiv(us, d) * d), nil }, nil
	}
	if t.Kind == plan.Interval {
		return nil, fmt.Errorf("unit %q not supported for type interval", field)
	}
	var start func(y int, m time.Month, d int, wd time.Weekday) (int, time.Month, int)
	switch unit {
	case "week":
		// Back to Monday.
		start = func(y int, m time.Month, d int, wd time.Weekday) (int, time.Month, int) {
			return y, m, d - (int(wd)+6)%7
		}
	case "month":
		start = func(y int, m time.Month, _ int, _ time.Weekday) (int, time.Month, int) { return y, m, 1 }
	case "quarter":
		start = func(y int, m time.Month, _ int, _ time.Weekday) (int, time.Month, int) { return y, m - (m-1)%3, 1 }
	case "year":
		start = func(y int, _ time.Month, _ int, _ time.Weekday) (int, time.Month, int) { return y, 1, 1 }
	case "decade":
		start = func(y int, _ time.Month, _ int, _ time.Weekday) (int, time.Month, int) { return y - mod(y, 10), 1, 1 }
	case "century":
		// Centuries and millennia begin in years ending in 01.
		start = func(y int, _ time.Month, _ int, _ time.Weekday) (int, time.Month, int) {
			return y - mod(y-1, 100), 1, 1
		}
	case "millennium":
		start = func(y int, _ time.Month, _ int, _ time.Weekday) (int, time.Month, int) {
			return y - mod(y-1, 1000), 1, 1
		}
	default:
		return nil, fmt.Errorf("unit %q not recognized for type %s", field, t)
	}
	return func(us int64) (row.Value, error) {
		tm := time.UnixMicro(us).UTC()
		y, m, d := start(tm.Year(), tm.Month(), tm.Day(), tm.Weekday())
		return row.Int(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).UnixMicro()), nil
	}, nil
}

func mod(a, b int) int {
	if r := a % b; r < 0 {
		return r + b
	}
	return a % b
}

// resolveExtract types extract(field, x): NUMERIC of scale 6, enough for
// every field (see ResolveCall).
func resolveExtract(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) == 2 && (args[0].Kind == plan.Varchar || args[0].Kind == plan.Null) {
		if t, ok := timeArg(args[1], true); ok {
			return []plan.Type{varchar, t}, numeric(6), nil
		}
	}
	return nil, plan.Type{}, undefined(fn, args)
}

// extractField is a field extract computes, as a mantissa of its scale,
// from a timestamp's civil time (tm) and microseconds, or from an
// interval's microseconds (nil when the field is not an interval's).
type extractField struct {
	scale    int
	ts       func(tm time.Time, us int64) int64
	interval func(us int64) int64
}

var extractFields = func() map[string]extractField {
	year := func(tm time.Time) int64 {
		// Before 1 AD, years count back from -1, as PostgreSQL's do.
		y := int64(tm.Year())
		if y <= 0 {
			y--
		}
		return y
	}
	secUS := func(tm time.Time) int64 { return int64(tm.Second())*1_000_000 + int64(tm.Nanosecond()/1000) }
	ivSecUS := func(us int64) int64 { return us % 60_000_000 }
	f := map[string]extractField{
		"microseconds": {0, func(tm time.Time, _ int64) int64 { return secUS(tm) }, ivSecUS},
		"milliseconds": {3, func(tm time.Time, _ int64) int64 { return secUS(tm) }, ivSecUS},
		"second":       {6, func(tm time.Time, _ int64) int64 { return secUS(tm) }, ivSecUS},
		"minute":       {0, func(tm time.Time, _ int64) int64 { return int64(tm.Minute()) }, func(us int64) int64 { return us % 3_600_000_000 / 60_000_000 }},
		"hour":         {0, func(tm time.Time, _ int64) int64 { return int64(tm.Hour()) }, func(us int64) int64 { return us % usPerDay / 3_600_000_000 }},
		"day":          {0, func(tm time.Time, _ int64) int64 { return int64(tm.Day()) }, func(us int64) int64 { return us / usPerDay }},
		"month":        {0, func(tm time.Time, _ int64) int64 { return int64(tm.Month()) }, nil},
		"quarter":      {0, func(tm time.Time, _ int64) int64 { return int64(tm.Month()+2) / 3 }, nil},
		"year":         {0, func(tm time.Time, _ int64) int64 { return year(tm) }, nil},
		"decade":       {0, func(tm time.Time, _ int64) int64 { return floorDiv(int64(tm.Year()), 10) }, nil},
		"century":      {0, func(tm time.Time, _ int64) int64 { return firstYearBased(year(tm), 100) }, nil},
		"millennium":   {0, func(tm time.Time, _ int64) int64 { return firstYearBased(year(tm), 1000) }, nil},
		"dow":          {0, func(tm time.Time, _ int64) int64 { return int64(tm.Weekday()) }, nil},
		"isodow":       {0, func(tm time.Time, _ int64) int64 { return int64(tm.Weekday()+6)%7 + 1 }, nil},
		"doy":          {0, func(tm time.Time, _ int64) int64 { return int64(tm.YearDay()) }, nil},
		"week":         {0, func(tm time.Time, _ int64) int64 { _, w := tm.ISOWeek(); return int64(w) }, nil},
		"isoyear":      {0, func(tm time.Time, _ int64) int64 { y, _ := tm.ISOWeek(); return int64(y) }, nil},
		"epoch":        {6, func(_ time.Time, us int64) int64 { return us }, func(us int64) int64 { return us }},
	}
	// PostgreSQL takes the plurals too.
	for _, name := range []string{"second", "minute", "hour", "day", "month", "quarter", "year", "decade"} {
		f[name+"s"] = f[name]
	}
	f["microsecond"], f["millisecond"], f["centuries"], f["millennia"] = f["microseconds"], f["milliseconds"], f["century"], f["millennium"]
	return f
}()

// firstYearBased is the number of the century (n 100) or millennium
// (1000) of year y, as PostgreSQL counts them: the 21st century is
// 2001–2100, and before 1 AD they count back from -1.
func firstYearBased(y, n int64) int64 {
	if y > 0 {
		return (y + n - 1) / n
	}
	return -((n - 1 - y) / n)
}

// compileExtract computes extract(field, x) at its result type's scale;
// the field must be a constant.
func compileExtract(c *call) (Eval, error) {
	v, ok := c.constArg(0)
	if !ok || v.IsNull() {
		return nil, fmt.Errorf("extract's field must be a constant")
	}
	field, ok := extractFields[strings.ToLower(v.Str())]
	switch {
	case !ok:
		return nil, fmt.Errorf("unit %q not recognized for type %s", v.Str(), c.types[1])
	case c.types[1].Kind == plan.Interval && field.interval == nil:
		return nil, fmt.Errorf("unit %q not supported for type %s", v.Str(), c.types[1])
	}
	from, to := field.scale, scaleOf(c.res)
	result := func(m int64) (row.Value, error) {
		m, err := rescale(m, from, to)
		if err != nil {
			return row.Value{}, err
		}
		return row.Int(m), nil
	}
	if c.types[1].Kind == plan.Interval {
		return unary(c.evals[1], func(x row.Value) (row.Value, error) { return result(field.interval(x.Int())) }), nil
	}
	return unary(c.evals[1], func(x row.Value) (row.Value, error) {
		return result(field.ts(time.UnixMicro(x.Int()).UTC(), x.Int()))
	}), nil
}

func resolveToChar(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) == 2 && (args[1].Kind == plan.Varchar || args[1].Kind == plan.Null) {
		if t, ok := timeArg(args[0], false); ok {
			return []plan.Type{t, varchar}, varchar, nil
		}
	}
	return nil, plan.Type{}, undefined(fn, args)
}

func compileToChar(c *call) (Eval, error) {
	tz := c.types[0].Kind == plan.TimestampTZ
	if v, ok := c.constArg(1); ok && !v.IsNull() {
		f := parseToChar(v.Str())
		return unary(c.evals[0], func(x row.Value) (row.Value, error) { return row.Str(f.format(x.Int(), tz)), nil }), nil
	}
	return binary(c.evals[0], c.evals[1], func(x, y row.Value) (row.Value, error) {
		return row.Str(parseToChar(y.Str()).format(x.Int(), tz)), nil
	}), nil
}

// toCharItem is one element of a to_char format: a pattern, or literal
// text.
type toCharItem struct {
	pattern string // "" for literal text
	text    string
	fm      bool // fill mode: no padding
}

type toCharFormat []toCharItem

// toCharPatterns are the patterns to_char knows, longest first where one
// is a prefix of another. The names and AM/PM forms are matched exactly,
// as their case is their output's; the others in any case.
var toCharPatterns = []string{
	"MONTH", "Month", "month", "MON", "Mon", "mon", "DAY", "Day", "day", "DY", "Dy", "dy",
	"A.M.", "a.m.", "P.M.", "p.m.", "AM", "am", "PM", "pm", "TZ", "tz",
	"HH24", "HH12", "HH", "MI", "SSSS", "SS", "MS", "US", "YYYY", "YYY", "YY", "Y",
	"MM", "DDD", "DD", "D", "ID", "IW", "WW", "Q", "OF",
}

// caseless are the patterns matched in any case.
var caseless = map[string]bool{
	"HH24": true, "HH12": true, "HH": true, "MI": true, "SSSS": true, "SS": true, "MS": true,
	"US": true, "YYYY": true, "YYY": true, "YY": true, "Y": true, "MM": true, "DDD": true,
	"DD": true, "D": true, "ID": true, "IW": true, "WW": true, "Q": true, "OF": true,
}

// parseToChar compiles a format of PostgreSQL's to_char: its patterns,
// FM (fill mode) before one, "quoted text" (in which a backslash escapes
// any character; outside, only a quote), and any other character as
// itself.
func parseToChar(s string) toCharFormat {
	var f toCharFormat
	literal := func(t string) {
		if n := len(f); n > 0 && f[n-1].pattern == "" {
			f[n-1].text += t
			return
		}
		f = append(f, toCharItem{text: t})
	}
	fm := false
outer:
	for i := 0; i < len(s); {
		rest := s[i:]
		if len(rest) >= 2 && strings.EqualFold(rest[:2], "FM") {
			fm = true
			i += 2
			continue
		}
		for _, p := range toCharPatterns {
			if strings.HasPrefix(rest, p) || caseless[p] && len(rest) >= len(p) && strings.EqualFold(rest[:len(p)], p) {
				f = append(f, toCharItem{pattern: p, fm: fm})
				fm = false
				i += len(p)
				continue outer
			}
		}
		fm = false
		switch {
		case rest[0] == '"':
			// Quoted text, where a backslash escapes any character.
			var q strings.Builder
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				q.WriteByte(s[i])
			}
			literal(q.String())
			i++
		case strings.HasPrefix(rest, `\"`):
			// Outside quotes, a backslash only escapes a quote.
			literal(`"`)
			i += 2
		default:
			literal(rest[:1])
			i++
		}
	}
	return f
}

// format writes timestamp us (UTC) by f.
func (f toCharFormat) format(us int64, tz bool) string {
	tm := time.UnixMicro(us).UTC()
	var buf [64]byte
	b := buf[:0]
	num := func(n int64, width int, fm bool) {
		if n < 0 {
			b = append(b, '-')
			n = -n
		}
		if !fm {
			for w := digits(n); w < width; w++ {
				b = append(b, '0')
			}
		}
		b = strconv.AppendInt(b, n, 10)
	}
	// name writes a name in the pattern's case, padded to 9 characters
	// (the longest month's) when pad is set.
	name := func(s, pattern string, pad bool) {
		switch {
		case pattern == strings.ToUpper(pattern):
			s = strings.ToUpper(s)
		case pattern == strings.ToLower(pattern):
			s = strings.ToLower(s)
		}
		b = append(b, s...)
		for n := len(s); pad && n < 9; n++ {
			b = append(b, ' ')
		}
	}
	year := int64(tm.Year())
	if year <= 0 {
		year = 1 - year
	}
	h12 := int64(tm.Hour() % 12)
	if h12 == 0 {
		h12 = 12
	}
	for _, it := range f {
		switch p := strings.ToUpper(it.pattern); p {
		case "":
			b = append(b, it.text...)
		case "YYYY":
			num(year, 4, it.fm)
		case "YYY":
			num(year%1000, 3, it.fm)
		case "YY":
			num(year%100, 2, it.fm)
		case "Y":
			num(year%10, 1, it.fm)
		case "MM":
			num(int64(tm.Month()), 2, it.fm)
		case "DD":
			num(int64(tm.Day()), 2, it.fm)
		case "DDD":
			num(int64(tm.YearDay()), 3, it.fm)
		case "D":
			num(int64(tm.Weekday())+1, 1, it.fm)
		case "ID":
			num(int64(tm.Weekday()+6)%7+1, 1, it.fm)
		case "IW":
			_, w := tm.ISOWeek()
			num(int64(w), 2, it.fm)
		case "WW":
			num(int64(tm.YearDay()-1)/7+1, 2, it.fm)
		case "Q":
			num(int64(tm.Month()+2)/3, 1, it.fm)
		case "HH", "HH12":
			num(h12, 2, it.fm)
		case "HH24":
			num(int64(tm.Hour()), 2, it.fm)
		case "MI":
			num(int64(tm.Minute()), 2, it.fm)
		case "SS":
			num(int64(tm.Second()), 2, it.fm)
		case "SSSS":
			num(int64(tm.Hour()*3600+tm.Minute()*60+tm.Second()), 1, it.fm)
		case "MS":
			num(int64(tm.Nanosecond()/1_000_000), 3, it.fm)
		case "US":
			num(int64(tm.Nanosecond()/1000), 6, it.fm)
		case "AM", "PM", "A.M.", "P.M.":
			m := "AM"
			if tm.Hour() >= 12 {
				m = "PM"
			}
			if strings.Contains(p, ".") {
				m = m[:1] + "." + m[1:] + "."
			}
			if it.pattern[0] >= 'a' {
				m = strings.ToLower(m)
			}
			b = append(b, m...)
		case "MONTH", "MON":
			n := tm.Month().String()
			if p == "MON" {
				n = n[:3]
			}
			name(n, it.pattern, p == "MONTH" && !it.fm)
		case "DAY", "DY":
			n := tm.Weekday().String()
			if p == "DY" {
				n = n[:3]
			}
			name(n, it.pattern, p == "DAY" && !it.fm)
		case "TZ":
			if tz {
				name("UTC", it.pattern, false)
			}
		case "OF":
			if tz {
				b = append(b, "+00"...)
			}
		}
	}
	return string(b)
}

func digits(n int64) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// compileNow is now(): the wall clock when the row is computed, so not
// deterministic.
func compileNow(*call) (Eval, error) {
	return func(row.Row) (row.Value, error) { return row.Int(time.Now().UnixMicro()), nil }, nil
}
