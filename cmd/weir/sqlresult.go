package main

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

type resultFormat int

const (
	resultTable resultFormat = iota
	resultCSV
)

func parseResultFormat(s string) (resultFormat, error) {
	switch s {
	case "table":
		return resultTable, nil
	case "csv":
		return resultCSV, nil
	}
	return 0, usageErrorf("invalid output format %q (want table or csv)", s)
}

// resultWriter prints a SELECT's rows as they come. A table's columns
// cannot be sized by the widest value, which has not arrived yet: each is
// as wide as its name or its type's usual values, whichever is wider, and
// a longer value widens its own line only.
type resultWriter struct {
	w      *bufio.Writer
	format resultFormat
	schema plan.Schema
	codec  *row.Codec
	widths []int
	r      row.Row
	buf    []byte
}

func newResultWriter(w io.Writer, format resultFormat, schema plan.Schema) *resultWriter {
	out := &resultWriter{w: bufio.NewWriter(w), format: format, schema: schema, codec: row.NewCodec(schema)}
	for _, c := range schema {
		out.widths = append(out.widths, max(utf8.RuneCountInString(c.Name), typeWidth(c.Type)))
	}
	return out
}

// typeWidth is how wide a type's values usually print.
func typeWidth(t plan.Type) int {
	switch t.Kind {
	case plan.Bool:
		return 1
	case plan.Int16:
		return 6
	case plan.Int32:
		return 11
	case plan.Int64, plan.Float32:
		return 12
	case plan.Decimal, plan.Float64, plan.Varchar, plan.Interval:
		return 16
	case plan.Date:
		return len("2006-01-02")
	case plan.Timestamp:
		return len("2006-01-02 15:04:05.000")
	case plan.TimestampTZ:
		return len("2006-01-02 15:04:05.000+00")
	}
	return len("NULL")
}

// rightAligned: numbers line up on their last digit, as in psql.
func rightAligned(t plan.Type) bool { return t.Numeric() }

func (o *resultWriter) header() error {
	if o.format == resultCSV {
		names := make([]string, len(o.schema))
		for i, c := range o.schema {
			names[i] = c.Name
		}
		cw := csv.NewWriter(o.w)
		if err := cw.Write(names); err != nil {
			return fmt.Errorf("write rows: %w", err)
		}
		cw.Flush()
		return o.flush()
	}
	cells := make([]string, len(o.schema))
	rules := make([]string, len(o.schema))
	for i, c := range o.schema {
		cells[i] = c.Name
		rules[i] = strings.Repeat("-", o.widths[i])
	}
	o.line(cells)
	o.line(rules)
	return o.flush()
}

// row prints one row, a record value in the binary row format.
func (o *resultWriter) row(value []byte) error {
	r, err := o.codec.Decode(value, o.r)
	if err != nil {
		return fmt.Errorf("decode a row of %s: %w", o.schema, err)
	}
	o.r = r
	if o.format == resultCSV {
		o.buf = append(row.AppendCSV(o.buf[:0], o.schema, r), '\n')
		_, err := o.w.Write(o.buf)
		return err
	}
	cells := make([]string, len(r))
	for i, v := range r {
		if v.IsNull() {
			cells[i] = "NULL"
			continue
		}
		cells[i] = string(row.AppendText(nil, o.schema[i].Type, v))
	}
	o.line(cells)
	return nil
}

func (o *resultWriter) line(cells []string) {
	for i, c := range cells {
		if i > 0 {
			o.w.WriteString("  ")
		}
		pad := strings.Repeat(" ", max(0, o.widths[i]-utf8.RuneCountInString(c)))
		switch {
		case rightAligned(o.schema[i].Type):
			o.w.WriteString(pad + c)
		case i < len(cells)-1:
			o.w.WriteString(c + pad)
		default:
			// No trailing blanks.
			o.w.WriteString(c)
		}
	}
	o.w.WriteByte('\n')
}

// flush writes what is buffered: rows show as they come.
func (o *resultWriter) flush() error {
	if err := o.w.Flush(); err != nil {
		return fmt.Errorf("write rows: %w", err)
	}
	return nil
}

// footer counts the rows under a table, as psql does.
func (o *resultWriter) footer(n int64) error {
	if o.format == resultTable {
		unit := "rows"
		if n == 1 {
			unit = "row"
		}
		fmt.Fprintf(o.w, "(%d %s)\n", n, unit)
	}
	return o.flush()
}
