package row

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/weirproject/weir/internal/sql/plan"
)

// AppendCSV appends r as one line of PostgreSQL's COPY … CSV, without the
// newline: each value's text (AppendText), NULL as an empty field, and a
// VARCHAR quoted as RFC 4180 says when it holds a comma, a quote, CR or
// LF — or is empty, which unquoted would read as NULL.
func AppendCSV(dst []byte, s plan.Schema, r Row) []byte {
	for i, col := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		v := r[i]
		if col.Type.Kind == plan.Varchar && !v.IsNull() && (v.s == "" || strings.ContainsAny(v.s, ",\"\r\n")) {
			dst = appendQuoted(dst, v.s)
			continue
		}
		dst = AppendText(dst, col.Type, v)
	}
	return dst
}

func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			break
		}
		dst = append(dst, s[:i+1]...)
		dst = append(dst, '"')
		s = s[i+1:]
	}
	dst = append(dst, s...)
	return append(dst, '"')
}

// ParseCSV reads one CSV line (a trailing newline is ignored) of schema s
// into r, reusing r's array when it has the room: an empty field is NULL,
// a quoted one ("" too) a value, read by ParseText. The line must have
// the schema's number of fields.
func ParseCSV(s plan.Schema, line []byte, r Row) (Row, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if cap(r) >= len(s) {
		r = r[:len(s)]
	} else {
		r = make(Row, len(s))
	}
	i, p := 0, 0
	for {
		field, quoted, next, err := csvField(line, p)
		if err != nil {
			return r, fmt.Errorf("csv: field %d: %w", i+1, err)
		}
		if i < len(s) {
			if r[i], err = csvValue(s[i].Type, field, quoted); err != nil {
				return r, fmt.Errorf("csv: column %q: %w", s[i].Name, err)
			}
		}
		i++
		if next >= len(line) {
			break
		}
		p = next + 1 // past the comma
	}
	if i != len(s) {
		return r, fmt.Errorf("csv: %d fields, want %d %s", i, len(s), s)
	}
	return r, nil
}

// csvField is the field starting at p and where it ends (at a comma or the
// line's end), unquoted.
func csvField(line []byte, p int) (field string, quoted bool, end int, err error) {
	if p >= len(line) || line[p] != '"' {
		end = bytes.IndexByte(line[p:], ',')
		if end < 0 {
			end = len(line)
		} else {
			end += p
		}
		if bytes.IndexByte(line[p:end], '"') >= 0 {
			return "", false, 0, fmt.Errorf("bare quote in an unquoted field: %q", line[p:end])
		}
		return string(line[p:end]), false, end, nil
	}
	var b strings.Builder
	seg := p + 1
	for i := seg; i < len(line); i++ {
		if line[i] != '"' {
			continue
		}
		b.Write(line[seg:i])
		if i+1 < len(line) && line[i+1] == '"' {
			b.WriteByte('"')
			i++
			seg = i + 1
			continue
		}
		if i+1 < len(line) && line[i+1] != ',' {
			return "", false, 0, fmt.Errorf("text after the closing quote: %q", line[i+1:])
		}
		return b.String(), true, i + 1, nil
	}
	return "", false, 0, fmt.Errorf("no closing quote")
}

func csvValue(t plan.Type, field string, quoted bool) (Value, error) {
	if field == "" && !quoted {
		return Value{}, nil
	}
	return ParseText(t, field)
}
