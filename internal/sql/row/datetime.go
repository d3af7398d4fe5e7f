package row

import (
	"errors"
	"math"
	"math/bits"
	"strings"
)

// scanner reads the text of a date, time or interval.
type scanner struct {
	s string
	i int
}

// num reads an unsigned decimal of min to max digits.
func (p *scanner) num(min, max int) (int64, bool) {
	j, n := p.i, int64(0)
	for j < len(p.s) && j-p.i < max && isDigit(p.s[j]) {
		n = n*10 + int64(p.s[j]-'0')
		j++
	}
	if j-p.i < min {
		return 0, false
	}
	p.i = j
	return n, true
}

func (p *scanner) byte(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *scanner) word(w string) bool {
	if len(p.s)-p.i >= len(w) && strings.EqualFold(p.s[p.i:p.i+len(w)], w) {
		p.i += len(w)
		return true
	}
	return false
}

func (p *scanner) spaces() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

// fraction reads the digits after a second's point as microseconds,
// rounding half up.
func (p *scanner) fraction() (int64, bool) {
	start, us := p.i, int64(0)
	for ; p.i < len(p.s) && isDigit(p.s[p.i]); p.i++ {
		switch d := int64(p.s[p.i] - '0'); {
		case p.i-start < 6:
			us = us*10 + d
		case p.i-start == 6 && d >= 5:
			us++
		}
	}
	for n := p.i - start; n < 6; n++ {
		us *= 10
	}
	return us, p.i > start
}

// maxDays keeps a date's microseconds, with a day and a zone offset
// added, within int64.
const maxDays = math.MaxInt64/usPerDay - 2

// parseDateTime reads a date with an optional time of day, zone offset
// and era: days is the date's day (the offset ignored), us the instant
// in microseconds since the epoch UTC. Errors: errSyntax, errRange.
func parseDateTime(s string) (days, us int64, err error) {
	p := scanner{s: strings.TrimSpace(s)}
	y, ok1 := p.num(1, 9)
	ok2 := p.byte('-')
	m, ok3 := p.num(1, 2)
	ok4 := p.byte('-')
	d, ok5 := p.num(1, 2)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return 0, 0, errSyntax
	}
	var tod int64
	if p.i < len(p.s) && (p.s[p.i] == 'T' || p.s[p.i] == 't' || p.s[p.i] == ' ') {
		save := p.i
		p.i++
		p.spaces()
		if h, ok := p.num(1, 2); ok && p.byte(':') {
			mi, ok := p.num(2, 2)
			if !ok {
				return 0, 0, errSyntax
			}
			var sec, frac int64
			if p.byte(':') {
				if sec, ok = p.num(2, 2); !ok {
					return 0, 0, errSyntax
				}
				if p.byte('.') {
					if frac, ok = p.fraction(); !ok {
						return 0, 0, errSyntax
					}
				}
			}
			if h > 24 || mi > 59 || sec > 60 || h == 24 && mi+sec+frac > 0 {
				return 0, 0, errRange
			}
			tod = (h*3600+mi*60+sec)*usPerSec + frac
		} else {
			p.i = save
		}
	}
	p.spaces()
	var zone int64
	switch {
	case p.word("Z"), p.word("UTC"), p.word("GMT"):
	case p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-'):
		neg := p.s[p.i] == '-'
		p.i++
		zh, ok := p.num(1, 2)
		if !ok {
			return 0, 0, errSyntax
		}
		var zm, zs int64
		p.byte(':')
		if zm, ok = p.num(2, 2); ok {
			p.byte(':')
			zs, _ = p.num(2, 2)
		}
		if zh > 15 || zm > 59 || zs > 59 {
			return 0, 0, errRange
		}
		zone = (zh*3600 + zm*60 + zs) * usPerSec
		if neg {
			zone = -zone
		}
	}
	p.spaces()
	bc := false
	switch {
	case p.word("BC"):
		bc = true
	case p.word("AD"):
	}
	if p.i != len(p.s) {
		return 0, 0, errSyntax
	}
	if y == 0 || m < 1 || m > 12 {
		return 0, 0, errRange
	}
	if bc {
		y = 1 - y
	}
	if d < 1 || d > monthDays(y, m) {
		return 0, 0, errRange
	}
	days = daysFromCivil(y, m, d)
	if days > maxDays || days < -maxDays {
		return 0, 0, errRange
	}
	return days, days*usPerDay + tod - zone, nil
}

func monthDays(y, m int64) int64 {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// intervalUnits are the microseconds of the units an interval's text
// names.
var intervalUnits = map[string]int64{
	"microsecond": 1, "microseconds": 1, "us": 1, "usec": 1, "usecs": 1,
	"millisecond": 1000, "milliseconds": 1000, "ms": 1000, "msec": 1000, "msecs": 1000,
	"second": usPerSec, "seconds": usPerSec, "s": usPerSec, "sec": usPerSec, "secs": usPerSec,
	"minute": 60 * usPerSec, "minutes": 60 * usPerSec, "m": 60 * usPerSec, "min": 60 * usPerSec, "mins": 60 * usPerSec,
	"hour": 3600 * usPerSec, "hours": 3600 * usPerSec, "h": 3600 * usPerSec, "hr": 3600 * usPerSec, "hrs": 3600 * usPerSec,
	"day": usPerDay, "days": usPerDay, "d": usPerDay,
	"week": 7 * usPerDay, "weeks": 7 * usPerDay, "w": 7 * usPerDay,
}

// monthUnits are the units an interval of microseconds cannot hold.
var monthUnits = map[string]bool{
	"month": true, "months": true, "mon": true, "mons": true, "year": true, "years": true,
	"y": true, "yr": true, "yrs": true, "decade": true, "decades": true, "century": true,
	"centuries": true, "millennium": true, "millennia": true,
}

var errMonths = errors.New("months and years are not supported: an interval is a number of microseconds")

// parseInterval reads an interval's text; errors: errSyntax, errRange,
// errMonths.
func parseInterval(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) > 0 && f[0] == "@" {
		f = f[1:]
	}
	if len(f) == 0 {
		return 0, errSyntax
	}
	if len(f) == 1 && strings.ContainsAny(f[0][:min(2, len(f[0]))], "Pp") {
		return parseISOInterval(f[0])
	}
	var total int64
	for i := 0; i < len(f); i++ {
		tok := f[i]
		var v int64
		var err error
		switch {
		case i > 0 && i == len(f)-1 && strings.EqualFold(tok, "ago"):
			total = -total
			continue
		case strings.IndexByte(tok, ':') >= 0:
			v, err = parseClock(tok)
		default:
			j := 0
			for j < len(tok) && (isDigit(tok[j]) || strings.IndexByte("+-.", tok[j]) >= 0) {
				j++
			}
			num, unit := tok[:j], tok[j:]
			if unit == "" && i+1 < len(f) && isLetter(f[i+1][0]) && !strings.EqualFold(f[i+1], "ago") {
				i++
				unit = f[i]
			}
			v, err = unitValue(num, unit)
		}
		if err != nil {
			return 0, err
		}
		var ok bool
		if total, ok = add64(total, v); !ok {
			return 0, errRange
		}
	}
	return total, nil
}

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// unitValue is num (a decimal) of unit, in microseconds; no unit is
// seconds.
func unitValue(num, unit string) (int64, error) {
	mult := int64(usPerSec)
	if unit != "" {
		u := strings.ToLower(unit)
		if monthUnits[u] {
			return 0, errMonths
		}
		var ok bool
		if mult, ok = intervalUnits[u]; !ok {
			return 0, errSyntax
		}
	}
	m, _, err := parseDecimal(num, 6)
	switch {
	case err == errSyntax:
		return 0, errSyntax
	case err != nil:
		return 0, errRange
	}
	v, ok := mulDivRound(m, mult, usPerSec)
	if !ok {
		return 0, errRange
	}
	return v, nil
}

// parseClock reads [-+]H:MM[:SS[.fff]], hours unbounded.
func parseClock(tok string) (int64, error) {
	p := scanner{s: tok}
	neg := p.byte('-')
	if !neg {
		p.byte('+')
	}
	h, ok1 := p.num(1, 9)
	ok2 := p.byte(':')
	mi, ok3 := p.num(1, 2)
	if !ok1 || !ok2 || !ok3 {
		return 0, errSyntax
	}
	var sec int64
	if p.byte(':') {
		s, _, err := parseDecimal(p.s[p.i:], 6)
		if err != nil || strings.ContainsAny(p.s[p.i:], "+-eE") {
			return 0, errSyntax
		}
		sec, p.i = s, len(p.s)
	}
	if p.i != len(p.s) {
		return 0, errSyntax
	}
	if mi > 59 || sec >= 60*usPerSec {
		return 0, errRange
	}
	us := (h*3600+mi*60)*usPerSec + sec
	if neg {
		us = -us
	}
	return us, nil
}

// parseISOInterval reads ISO 8601's P[nW][nD][T[nH][nM][nS]], with an
// optional leading minus.
func parseISOInterval(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if len(s) < 2 || s[0]|0x20 != 'p' {
		return 0, errSyntax
	}
	s = s[1:]
	inTime := false
	var total int64
	for s != "" {
		if s[0]|0x20 == 't' && !inTime {
			inTime, s = true, s[1:]
			continue
		}
		j := 0
		for j < len(s) && (isDigit(s[j]) || s[j] == '.' || s[j] == ',') {
			j++
		}
		if j == 0 || j == len(s) {
			return 0, errSyntax
		}
		num := strings.Replace(s[:j], ",", ".", 1)
		var unit string
		switch d := s[j] | 0x20; {
		case d == 'y' || d == 'm' && !inTime:
			return 0, errMonths
		case d == 'w' && !inTime:
			unit = "w"
		case d == 'd' && !inTime:
			unit = "d"
		case d == 'h' && inTime:
			unit = "h"
		case d == 'm':
			unit = "m"
		case d == 's' && inTime:
			unit = "s"
		default:
			return 0, errSyntax
		}
		v, err := unitValue(num, unit)
		if err != nil {
			return 0, err
		}
		var ok bool
		if total, ok = add64(total, v); !ok {
			return 0, errRange
		}
		s = s[j+1:]
	}
	if neg {
		total = -total
	}
	return total, nil
}

func add64(a, b int64) (int64, bool) {
	c := a + b
	return c, (c > a) == (b > 0)
}

// mulDivRound is a·b/c rounded half away from zero, through 128 bits;
// b >= 0, c > 0. ok is false when the result does not fit int64.
func mulDivRound(a, b, c int64) (int64, bool) {
	u := uint64(a)
	if a < 0 {
		u = -u
	}
	hi, lo := bits.Mul64(u, uint64(b))
	if hi >= uint64(c) {
		return 0, false
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r >= uint64(c)-r {
		if q >= 1<<63 {
			return 0, false
		}
		q++
	}
	if q > math.MaxInt64 && !(a < 0 && q == 1<<63) {
		return 0, false
	}
	if a < 0 {
		return -int64(q), true
	}
	return int64(q), true
}
