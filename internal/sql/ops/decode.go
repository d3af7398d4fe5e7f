package ops

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

// decoder reads an input record into a row of the decoding's schema,
// reusing r's array; ok is false for a record that holds no row of it (a
// Nexmark event of another kind).
type decoder func(rec sdk.Record, r row.Row) (_ row.Row, ok bool, err error)

// newDecoder is the decoder of d. used says which columns the operator
// reads: the sources' decoders fill only those (a query reading a bid's
// price and auction copies none of its strings). now is the subtask's
// clock in milliseconds, which fills the columns a source's records have
// no value for (a PROCTIME() column).
func newDecoder(d plan.Decoding, used []bool, now func() int64) (decoder, error) {
	s := d.Schema
	switch d.Format {
	case plan.FormatRow:
		codec := row.NewCodec(s)
		return func(rec sdk.Record, r row.Row) (row.Row, bool, error) {
			r, err := codec.Decode(rec.Value, r)
			return r, true, err
		}, nil
	case plan.FormatCSV, plan.FormatJSON:
		return newTextDecoder(d, now), nil
	case plan.FormatNexmarkBid, plan.FormatNexmarkAuction, plan.FormatNexmarkPerson:
		return newNexmarkDecoder(d, used, now)
	case plan.FormatSequence:
		return newSequenceDecoder(d, used, now)
	}
	return nil, fmt.Errorf("input format %q is not one a SQL operator reads", d.Format)
}

// sourceColumns maps a source's schema onto the fields its records have,
// by name: fields[i] is the field of column i, or -1 for a column the
// records have no value for, which must be a TIMESTAMPTZ, as PROCTIME()
// is (the processing time fills it; a misspelt TIMESTAMP field is an
// error, not the clock); clock lists those the operator reads. Columns
// the operator does not read map to -1 too, and stay NULL. types says
// whether a field reads as a column's type.
func sourceColumns(what string, s plan.Schema, used []bool, names []string, types func(field int, t plan.Type) bool) (fields, clock []int, err error) {
	fields = make([]int, len(s))
	for i, c := range s {
		fields[i] = -1
		f := -1
		for j, n := range names {
			if n == c.Name {
				f = j
			}
		}
		switch {
		case f < 0 && c.Type.Kind != plan.TimestampTZ:
			return nil, nil, fmt.Errorf("column %s %s: %s has no such field (it has %s), and only a TIMESTAMPTZ column can take the processing time",
				c.Name, c.Type, what, strings.Join(names, ", "))
		case f >= 0 && !types(f, c.Type):
			return nil, nil, fmt.Errorf("column %s %s: %s's field %s cannot be read as %s", c.Name, c.Type, what, c.Name, c.Type)
		case !used[i]:
		case f < 0:
			clock = append(clock, i)
		default:
			fields[i] = f
		}
	}
	return fields, clock, nil
}

// fieldKind is how a Nexmark event's field is encoded and typed.
type fieldKind uint8

const (
	// fieldInt is a BIGINT (a zig-zag varint).
	fieldInt fieldKind = iota
	// fieldStr is a VARCHAR (a uvarint length and the bytes).
	fieldStr
	// fieldTime is a TIMESTAMP given in milliseconds (a zig-zag varint).
	fieldTime
	// fieldExpires is an auction's expiry: milliseconds after its
	// date_time, the field before it.
	fieldExpires
)

type nexmarkField struct {
	name string
	kind fieldKind
}

// nexmarkTables are the columns of RisingWave's nexmark connector's
// tables, in the order of the fields of the Nexmark source's binary
// encoding (package nexmark's codec).
var nexmarkTables = map[plan.Format]struct {
	kind   nexmark.Kind
	fields []nexmarkField
}{
	plan.FormatNexmarkBid: {nexmark.KindBid, []nexmarkField{
		{"auction", fieldInt}, {"bidder", fieldInt}, {"price", fieldInt}, {"channel", fieldStr},
		{"url", fieldStr}, {"date_time", fieldTime}, {"extra", fieldStr},
	}},
	plan.FormatNexmarkAuction: {nexmark.KindAuction, []nexmarkField{
		{"id", fieldInt}, {"item_name", fieldStr}, {"description", fieldStr}, {"initial_bid", fieldInt},
		{"reserve", fieldInt}, {"date_time", fieldTime}, {"expires", fieldExpires}, {"seller", fieldInt},
		{"category", fieldInt}, {"extra", fieldStr},
	}},
	plan.FormatNexmarkPerson: {nexmark.KindPerson, []nexmarkField{
		{"id", fieldInt}, {"name", fieldStr}, {"email_address", fieldStr}, {"credit_card", fieldStr},
		{"city", fieldStr}, {"state", fieldStr}, {"date_time", fieldTime}, {"extra", fieldStr},
	}},
}

var errCorruptEvent = errors.New("corrupt Nexmark event")

// newNexmarkDecoder reads the Nexmark source's binary events of one kind,
// skipping the others, straight from the record's bytes: no event struct,
// and one string for all of a row's VARCHARs, when it reads any.
func newNexmarkDecoder(d plan.Decoding, used []bool, now func() int64) (decoder, error) {
	table := nexmarkTables[d.Format]
	names := make([]string, len(table.fields))
	for i, f := range table.fields {
		names[i] = f.name
	}
	types := func(f int, t plan.Type) bool {
		switch table.fields[f].kind {
		case fieldStr:
			return t.Kind == plan.Varchar
		case fieldInt:
			return t.Numeric()
		}
		return t.Kind == plan.Timestamp || t.Kind == plan.TimestampTZ
	}
	cols, clock, err := sourceColumns("a nexmark "+table.kind.String(), d.Schema, used, names, types)
	if err != nil {
		return nil, err
	}
	// target[f] is the column field f fills, or -1.
	target := make([]int, len(table.fields))
	for f := range target {
		target[f] = -1
	}
	for i, f := range cols {
		if f >= 0 {
			target[f] = i
		}
	}
	schema := d.Schema
	// strs holds the wanted strings' columns and where they are in the
	// record, between the two passes; at most 6 in an event.
	type span struct{ col, start, end int }
	var strs [8]span
	return func(rec sdk.Record, r row.Row) (row.Row, bool, error) {
		b := rec.Value
		if len(b) == 0 {
			return r, false, fmt.Errorf("%w: empty", errCorruptEvent)
		}
		switch k := nexmark.Kind(b[0]); {
		case k != nexmark.KindPerson && k != nexmark.KindAuction && k != nexmark.KindBid:
			return r, false, fmt.Errorf("%w: unknown kind %d", errCorruptEvent, k)
		case k != table.kind:
			return r, false, nil
		}
		r = resize(r, len(schema))
		p, n := 1, 0
		var last int64 // the previous field's value: an expiry's base
		for f, field := range table.fields {
			if field.kind == fieldStr {
				l, m := binary.Uvarint(b[p:])
				if m <= 0 || l > uint64(len(b)-p-m) {
					return r, false, fmt.Errorf("%w: field %s", errCorruptEvent, field.name)
				}
				if c := target[f]; c >= 0 {
					strs[n] = span{c, p + m, p + m + int(l)}
					n++
				}
				p += m + int(l)
				continue
			}
			v, m := binary.Varint(b[p:])
			if m <= 0 {
				return r, false, fmt.Errorf("%w: field %s", errCorruptEvent, field.name)
			}
			p += m
			if field.kind == fieldExpires {
				v += last
			}
			last = v
			c := target[f]
			if c < 0 {
				continue
			}
			var err error
			if field.kind == fieldInt {
				r[c], err = intValue(schema[c].Type, v)
			} else {
				r[c], err = msToTimestamp(v)
			}
			if err != nil {
				return r, false, fmt.Errorf("column %s: %w", schema[c].Name, err)
			}
		}
		if p != len(b) {
			return r, false, fmt.Errorf("%w: %d bytes after the %s", errCorruptEvent, len(b)-p, table.kind)
		}
		if n > 0 {
			base := strs[0].start
			all := string(b[base:strs[n-1].end])
			for _, s := range strs[:n] {
				r[s.col] = row.Str(all[s.start-base : s.end-base])
			}
		}
		fillClock(r, clock, now)
		return r, true, nil
	}, nil
}

// newSequenceDecoder reads the sequence source's records: k BIGINT from
// the decimal key, v BIGINT from the decimal value, ts TIMESTAMP from the
// timestamp.
func newSequenceDecoder(d plan.Decoding, used []bool, now func() int64) (decoder, error) {
	names := []string{"k", "v", "ts"}
	types := func(f int, t plan.Type) bool {
		if f == 2 {
			return t.Kind == plan.Timestamp || t.Kind == plan.TimestampTZ
		}
		return t.Kind == plan.Int64
	}
	cols, clock, err := sourceColumns("the sequence source", d.Schema, used, names, types)
	if err != nil {
		return nil, err
	}
	n := len(d.Schema)
	return func(rec sdk.Record, r row.Row) (row.Row, bool, error) {
		r = resize(r, n)
		for i, f := range cols {
			switch f {
			case 0, 1:
				b := rec.Key
				if f == 1 {
					b = rec.Value
				}
				v, err := parseDecimal(b)
				if err != nil {
					return r, false, fmt.Errorf("column %s: %w", names[f], err)
				}
				r[i] = row.Int(v)
			case 2:
				v, err := msToTimestamp(rec.Timestamp)
				if err != nil {
					return r, false, fmt.Errorf("column ts: %w", err)
				}
				r[i] = v
			}
		}
		fillClock(r, clock, now)
		return r, true, nil
	}, nil
}

// resize is r with n columns, its array reused when it has the room; the
// columns a decoder does not fill are NULL.
func resize(r row.Row, n int) row.Row {
	if cap(r) < n {
		return make(row.Row, n)
	}
	r = r[:n]
	clear(r)
	return r
}

// fillClock sets the processing-time columns.
func fillClock(r row.Row, cols []int, now func() int64) {
	if len(cols) == 0 {
		return
	}
	us := row.Int(now() * 1000)
	for _, c := range cols {
		r[c] = us
	}
}

var errTimeRange = errors.New("timestamp out of range")

// msToTimestamp is a TIMESTAMP (µs) from milliseconds.
func msToTimestamp(ms int64) (row.Value, error) {
	if ms > math.MaxInt64/1000 || ms < math.MinInt64/1000 {
		return row.Value{}, fmt.Errorf("%w: %d ms", errTimeRange, ms)
	}
	return row.Int(ms * 1000), nil
}

// intValue is the integer v as a value of numeric type t.
func intValue(t plan.Type, v int64) (row.Value, error) {
	switch t.Kind {
	case plan.Int64:
		return row.Int(v), nil
	case plan.Int16, plan.Int32:
		if (t.Kind == plan.Int16 && v != int64(int16(v))) || (t.Kind == plan.Int32 && v != int64(int32(v))) {
			return row.Value{}, fmt.Errorf("%d is out of range for type %s", v, t)
		}
		return row.Int(v), nil
	case plan.Float32:
		return row.Float(float64(float32(v))), nil
	case plan.Float64:
		return row.Float(float64(v)), nil
	case plan.Decimal:
		m, ok := mulPow10(v, int(t.Scale))
		if !ok {
			return row.Value{}, fmt.Errorf("%d: %w for type %s", v, row.ErrNumericOverflow, t)
		}
		return row.Int(m), nil
	}
	return row.Value{}, fmt.Errorf("type %s is not a number", t)
}

// mulPow10 is v·10^k, ok false when it overflows.
func mulPow10(v int64, k int) (int64, bool) {
	for range k {
		if v > math.MaxInt64/10 || v < math.MinInt64/10 {
			return 0, false
		}
		v *= 10
	}
	return v, true
}

// parseDecimal parses a decimal integer without converting b to a string
// (which allocates) when it has at most 18 digits, which cannot overflow.
func parseDecimal(b []byte) (int64, error) {
	digits := b
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return strconv.ParseInt(string(b), 10, 64)
	}
	var v int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a decimal integer", b)
		}
		v = v*10 + int64(c-'0')
	}
	if len(digits) < len(b) {
		v = -v
	}
	return v, nil
}

// newTextDecoder reads CSV or JSON rows (a Kafka source's messages): the
// text holds the columns but the event-time one, which the calc fills
// from the record's timestamp, and the processing-time ones, which the
// clock fills.
func newTextDecoder(d plan.Decoding, now func() int64) decoder {
	skip := map[int]bool{}
	if d.Timestamp >= 0 {
		skip[d.Timestamp] = true
	}
	for _, c := range d.Clock {
		skip[c] = true
	}
	var text plan.Schema
	var at []int
	for i, c := range d.Schema {
		if !skip[i] {
			text = append(text, c)
			at = append(at, i)
		}
	}
	parse := row.ParseJSON
	if d.Format == plan.FormatCSV {
		parse = row.ParseCSV
	}
	var tmp row.Row
	return func(rec sdk.Record, r row.Row) (row.Row, bool, error) {
		var err error
		if tmp, err = parse(text, rec.Value, tmp); err != nil {
			return r, false, err
		}
		if cap(r) < len(d.Schema) {
			r = make(row.Row, len(d.Schema))
		}
		r = r[:len(d.Schema)]
		for j, i := range at {
			r[i] = tmp[j]
		}
		if len(d.Clock) > 0 {
			t := row.Int(now() * 1000)
			for _, c := range d.Clock {
				r[c] = t
			}
		}
		return r, true, nil
	}
}
