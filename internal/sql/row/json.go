package row

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/weirproject/weir/internal/sql/plan"
)

// AppendJSON appends r as one JSON object keyed by the schema's column
// names, in its order: numbers as JSON numbers (a NUMERIC with all of its
// scale's digits; a float's NaN and infinities, which JSON has no number
// for, as the strings "NaN", "Infinity", "-Infinity"), booleans as
// true/false, NULL as null, and everything else as a string of its
// PostgreSQL text.
func AppendJSON(dst []byte, s plan.Schema, r Row) []byte {
	dst = append(dst, '{')
	for i, col := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, col.Name)
		dst = append(dst, ':')
		v := r[i]
		switch k := col.Type.Kind; {
		case v.IsNull():
			dst = append(dst, "null"...)
		case k == plan.Bool:
			dst = strconv.AppendBool(dst, v.Bool())
		case k == plan.Varchar:
			dst = appendJSONString(dst, v.s)
		case (k == plan.Float32 || k == plan.Float64) && (math.IsNaN(v.Float()) || math.IsInf(v.Float(), 0)):
			dst = append(dst, '"')
			dst = AppendText(dst, col.Type, v)
			dst = append(dst, '"')
		case col.Type.Numeric():
			dst = AppendText(dst, col.Type, v)
		default:
			dst = append(dst, '"')
			dst = AppendText(dst, col.Type, v)
			dst = append(dst, '"')
		}
	}
	return append(dst, '}')
}

const hex = "0123456789abcdef"

// appendJSONString writes s as a JSON string, invalid UTF-8 as U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			if r == utf8.RuneError {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			}
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// ParseJSON reads one JSON object into a row of schema s, reusing r's
// array when it has the room: each column from the member of its name
// (exactly; the last one if repeated), NULL when there is none or it is
// null; other members are skipped. A string becomes any type through
// ParseText; a number an integer (exactly: 1.0 and 1e3 are integers, 1.5
// an error), a NUMERIC (rounded to its scale, never through a float), a
// float, a VARCHAR (its text), or a TIMESTAMP or TIMESTAMPTZ as
// milliseconds since the epoch; true/false a BOOLEAN or a VARCHAR; an
// object or array a VARCHAR of its JSON text.
func ParseJSON(s plan.Schema, b []byte, r Row) (Row, error) {
	if cap(r) >= len(s) {
		r = r[:len(s)]
	} else {
		r = make(Row, len(s))
	}
	clear(r)
	p := jsonParser{b: b}
	if err := p.object(s, r); err != nil {
		return r, fmt.Errorf("json: %w", err)
	}
	return r, nil
}

type jsonParser struct {
	b []byte
	i int
}

// maxDepth bounds the nesting of the values skipped, so that a hostile
// record cannot exhaust the stack.
const maxDepth = 1000

func (p *jsonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *jsonParser) object(s plan.Schema, r Row) error {
	if p.peek() != '{' {
		return p.errorf("want an object")
	}
	p.i++
	if p.peek() == '}' {
		p.i++
	} else {
		for {
			if p.peek() != '"' {
				return p.errorf("want a member name")
			}
			start, end, escaped, err := p.str()
			if err != nil {
				return err
			}
			col := -1
			if escaped {
				col = columnOf(s, unescape(p.b[start:end]))
			} else {
				for i, c := range s {
					if string(p.b[start:end]) == c.Name {
						col = i
					}
				}
			}
			if p.peek() != ':' {
				return p.errorf("want ':'")
			}
			p.i++
			if col < 0 {
				err = p.skip(0)
			} else if r[col], err = p.value(s[col].Type); err != nil {
				err = fmt.Errorf("column %q: %w", s[col].Name, err)
			}
			if err != nil {
				return err
			}
			if c := p.peek(); c == ',' {
				p.i++
				continue
			} else if c != '}' {
				return p.errorf("want ',' or '}'")
			}
			p.i++
			break
		}
	}
	if p.ws(); p.i != len(p.b) {
		return p.errorf("text after the object")
	}
	return nil
}

func columnOf(s plan.Schema, name string) int {
	col := -1
	for i, c := range s {
		if c.Name == name {
			col = i
		}
	}
	return col
}

// value reads a JSON value as a value of type t.
func (p *jsonParser) value(t plan.Type) (Value, error) {
	switch c := p.peek(); c {
	case '"':
		start, end, escaped, err := p.str()
		if err != nil {
			return Value{}, err
		}
		var text string
		if escaped {
			text = unescape(p.b[start:end])
		} else {
			text = string(p.b[start:end])
		}
		return ParseText(t, text)
	case 'n':
		return Value{}, p.literal("null")
	case 't', 'f':
		lit := "false"
		if c == 't' {
			lit = "true"
		}
		if err := p.literal(lit); err != nil {
			return Value{}, err
		}
		switch t.Kind {
		case plan.Bool:
			return Bool(c == 't'), nil
		case plan.Varchar:
			return Str(lit), nil
		}
		return Value{}, fmt.Errorf("a JSON boolean is not a %s", t)
	case '{', '[':
		start := p.i
		if err := p.skip(0); err != nil {
			return Value{}, err
		}
		if t.Kind != plan.Varchar {
			return Value{}, fmt.Errorf("a JSON object or array is not a %s", t)
		}
		return Str(string(p.b[start:p.i])), nil
	}
	start := p.i
	if err := p.number(); err != nil {
		return Value{}, err
	}
	return numberValue(t, string(p.b[start:p.i]))
}

// numberValue is a JSON number's text as a value of type t.
func numberValue(t plan.Type, num string) (Value, error) {
	switch t.Kind {
	case plan.Int16, plan.Int32, plan.Int64:
		// 1e3 and 1.0 are integers too.
		n, exact, err := parseDecimal(num, 0)
		switch {
		case err == nil && !exact:
			return Value{}, fmt.Errorf("%s is not an integer", num)
		case err != nil || !fits(t.Kind, n):
			return Value{}, fmt.Errorf("value %s is out of range for type %s", num, pgName(t.Kind))
		}
		return Int(n), nil
	case plan.Decimal, plan.Float32, plan.Float64, plan.Varchar:
		return ParseText(t, num)
	case plan.Timestamp, plan.TimestampTZ:
		// Milliseconds: their mantissa at scale 3 is microseconds.
		us, _, err := parseDecimal(num, 3)
		if err != nil {
			return Value{}, fmt.Errorf("%s milliseconds: timestamp out of range", num)
		}
		return Int(us), nil
	}
	return Value{}, fmt.Errorf("a JSON number is not a %s", t)
}

func (p *jsonParser) literal(lit string) error {
	if len(p.b)-p.i < len(lit) || string(p.b[p.i:p.i+len(lit)]) != lit {
		return p.errorf("want %s", lit)
	}
	p.i += len(lit)
	return nil
}

// str reads a string, returning where its contents are and whether they
// hold escapes.
func (p *jsonParser) str() (start, end int, escaped bool, err error) {
	p.i++ // the quote
	start = p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			end = p.i
			p.i++
			return start, end, escaped, nil
		case c == '\\':
			escaped = true
			p.i++
			if p.i >= len(p.b) {
				break
			}
			switch p.b[p.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i++
			case 'u':
				if len(p.b)-p.i < 5 || !isHex4(p.b[p.i+1:p.i+5]) {
					return 0, 0, false, p.errorf(`bad \u escape`)
				}
				p.i += 5
			default:
				return 0, 0, false, p.errorf("bad escape")
			}
		case c < 0x20:
			return 0, 0, false, p.errorf("control character in a string")
		default:
			p.i++
		}
	}
	return 0, 0, false, p.errorf("unterminated string")
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !isDigit(c) && (c|0x20 < 'a' || c|0x20 > 'f') {
			return false
		}
	}
	return true
}

// unescape is a JSON string's contents, which str validated, decoded.
func unescape(b []byte) string {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			out = append(out, b[i])
			continue
		}
		i++
		switch c := b[i]; c {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(b[i+1:])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
					r2 = hex4(b[i+3:])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, c)
		}
	}
	return string(out)
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case isDigit(c):
			r = r<<4 | rune(c-'0')
		default:
			r = r<<4 | rune(c|0x20-'a'+10)
		}
	}
	return r
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonParser) number() error {
	b, i := p.b, p.i
	digits := func() bool {
		j := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		return i > j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return p.errorf("bad number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return p.errorf("bad number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return p.errorf("bad number")
		}
	}
	p.i = i
	return nil
}

// skip reads past any JSON value.
func (p *jsonParser) skip(depth int) error {
	if depth > maxDepth {
		return p.errorf("nested more than %d deep", maxDepth)
	}
	switch p.peek() {
	case '"':
		_, _, _, err := p.str()
		return err
	case 'n':
		return p.literal("null")
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case '{', '[':
		closing := byte('}')
		if p.b[p.i] == '[' {
			closing = ']'
		}
		p.i++
		if p.peek() == closing {
			p.i++
			return nil
		}
		for {
			if closing == '}' {
				if p.peek() != '"' {
					return p.errorf("want a member name")
				}
				if _, _, _, err := p.str(); err != nil {
					return err
				}
				if p.peek() != ':' {
					return p.errorf("want ':'")
				}
				p.i++
			}
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			switch p.peek() {
			case ',':
				p.i++
			case closing:
				p.i++
				return nil
			default:
				return p.errorf("want ',' or '%c'", closing)
			}
		}
	}
	return p.number()
}
