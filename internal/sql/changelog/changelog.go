// Package changelog replays the changelog a SQL sink writes in Debezium
// mode (plan.SinkDebezium) into the result it describes, so that a test
// can compare a query whose results update (an unbounded GROUP BY, a TopN)
// with the final result it should have.
//
// Each line of the changelog is one JSON envelope: an add is
// {"before":null,"after":ROW,"op":"c"}, a retraction
// {"before":ROW,"after":null,"op":"d"}, and an update the retraction of the
// old row, then the add of the new. ROW is what row.AppendJSON writes: an
// object of the sink's columns, in order. A Replayer applies the lines in
// order to a state keyed by the result's primary key, and fails on the
// first line that does not fit it: an add of a key already present (a
// duplicated transition), the retraction of a key not present or of a row
// other than the one present (a lost one), or a line that is no envelope.
//
// The state's rows come out as the lines the engine's CSV sink writes
// (row.AppendCSV), computed from the JSON text alone, with no schema:
// AppendJSON writes numbers as their PostgreSQL text, which is the CSV
// text too; booleans as true/false, which CSV prints t/f; NULL as null,
// an empty CSV field; and every other value as a string of its PostgreSQL
// text, which CSV prints as is, quoted as row.AppendCSV quotes a VARCHAR
// when it is empty or holds a comma, a quote, CR or LF. Only a VARCHAR
// text can be empty or hold those (a timestamp's, an interval's, a float's
// NaN cannot), so the quoting is exact. What cannot be recovered is
// invalid UTF-8 in a VARCHAR, which AppendJSON writes as U+FFFD.
package changelog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// kind is the JSON kind of a value of a row.
type kind byte

const (
	null kind = iota
	str
	number
	boolean
)

// value is one value of a row: its JSON kind and text (a string's
// contents, a number's literal, "t" or "f").
type value struct {
	kind kind
	text string
}

// csv appends v as a field of a CSV line.
func (v value) csv(dst []byte) []byte {
	if v.kind != str || v.text != "" && !strings.ContainsAny(v.text, ",\"\r\n") {
		return append(dst, v.text...)
	}
	dst = append(dst, '"')
	dst = append(dst, strings.ReplaceAll(v.text, `"`, `""`)...)
	return append(dst, '"')
}

func (v value) String() string {
	switch v.kind {
	case null:
		return "null"
	case str:
		return strconv.Quote(v.text)
	}
	return v.text
}

// rowValues is a row's values, in its columns' order.
type rowValues []value

func (r rowValues) String() string {
	parts := make([]string, len(r))
	for i, v := range r {
		parts[i] = v.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// entry is the row present under a key, and with no key how many times.
type entry struct {
	row   rowValues
	count int
}

// State is a replayed changelog's result: the rows present at its end.
type State struct {
	// columns are the rows' column names, in order, from the first row
	// read; nil before.
	columns []string
	// key are the key columns' indexes in columns.
	key     []int
	keyName []string
	rows    map[string]*entry
	n       int
}

// Columns are the rows' column names, in their order (the sink's schema's),
// as the first row read named them; nil if no line had a row.
func (s *State) Columns() []string { return slices.Clone(s.columns) }

// Len is how many rows the state holds.
func (s *State) Len() int { return s.n }

// Rows are the state's rows as CSV lines, sorted, with the given columns
// in the given order (nil: all, in the schema's order), each line what
// row.AppendCSV prints for the row (see the package comment). It panics
// on a name not among Columns, unless the state has no rows.
func (s *State) Rows(columns []string) []string {
	if columns == nil {
		columns = s.columns
	}
	idx := make([]int, len(columns))
	for i, c := range columns {
		idx[i] = slices.Index(s.columns, c)
		if idx[i] < 0 && s.n > 0 {
			panic(fmt.Sprintf("changelog: no column %q in %v", c, s.columns))
		}
	}
	out := make([]string, 0, s.n)
	var b []byte
	for _, e := range s.rows {
		b = b[:0]
		for i, j := range idx {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.row[j].csv(b)
		}
		for range e.count {
			out = append(out, string(b))
		}
	}
	slices.Sort(out)
	return out
}

// Replayer applies a changelog's lines in order to a State.
type Replayer struct {
	s     State
	lines int
}

// NewReplayer is a Replayer of an empty state keyed by the columns named
// key (the result's primary key): a key holds one row at a time. With no
// key the whole row is the key, and the state a multiset: an add of a row
// present adds another copy.
func NewReplayer(key []string) *Replayer {
	return &Replayer{s: State{keyName: slices.Clone(key), rows: map[string]*entry{}}}
}

// State is the state the lines applied so far leave. It is the
// Replayer's own: applying more lines changes it.
func (r *Replayer) State() *State { return &r.s }

// Apply applies the next line of the changelog. A line of blanks alone is
// skipped. Errors name the line by its number: the lines given to Apply
// so far, this one included.
func (r *Replayer) Apply(line string) error {
	r.lines++
	if err := r.apply(line); err != nil {
		return fmt.Errorf("changelog line %d: %w", r.lines, err)
	}
	return nil
}

// ReadLines applies every line of rd in order (as Apply does, counting
// them on from the lines applied before); errors say name and the line's
// number in rd. The files of a sink's subtasks can be read one after the
// other when the sink's input is partitioned by the key, so that each
// key's changes are all in one file, in order.
func (r *Replayer) ReadLines(name string, rd io.Reader) error {
	br := bufio.NewReader(rd)
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s: %w", name, err)
		}
		if line != "" {
			r.lines++
			if err := r.apply(line); err != nil {
				return fmt.Errorf("%s:%d: %w", name, n, err)
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// Replay is the state lines, applied in order by a NewReplayer(key),
// leave.
func Replay(lines []string, key []string) (*State, error) {
	r := NewReplayer(key)
	for _, l := range lines {
		if err := r.Apply(l); err != nil {
			return nil, err
		}
	}
	return r.State(), nil
}

func (r *Replayer) apply(line string) error {
	if strings.TrimSpace(line) == "" {
		return nil
	}
	op, before, after, err := parseEnvelope(line)
	if err != nil {
		return err
	}
	switch op {
	case "c", "r":
		if before != nil || after == nil {
			return fmt.Errorf("op %q: want a null before and an after row", op)
		}
	case "d":
		if before == nil || after != nil {
			return fmt.Errorf("op %q: want a before row and a null after", op)
		}
	case "u":
		if before == nil || after == nil {
			return fmt.Errorf("op %q: want a before and an after row", op)
		}
	default:
		return fmt.Errorf("op %q: want c, d (or u, r)", op)
	}
	for _, m := range []*members{before, after} {
		if m != nil {
			if err := r.s.schema(m); err != nil {
				return err
			}
		}
	}
	if before != nil {
		if err := r.s.retract(before.values); err != nil {
			return err
		}
	}
	if after != nil {
		if err := r.s.add(after.values); err != nil {
			if before != nil {
				r.s.add(before.values) // undo the update's retraction
			}
			return err
		}
	}
	return nil
}

// schema checks that row m has the columns of the rows before it; the
// first row sets them.
func (s *State) schema(m *members) error {
	if s.columns == nil {
		for _, k := range s.keyName {
			i := slices.Index(m.names, k)
			if i < 0 {
				return fmt.Errorf("key column %q not in the row's columns %v", k, m.names)
			}
			s.key = append(s.key, i)
		}
		s.columns = m.names
		return nil
	}
	if !slices.Equal(m.names, s.columns) {
		return fmt.Errorf("a row of columns %v after rows of %v", m.names, s.columns)
	}
	return nil
}

// keyOf is the state's key of row v: its key columns' values, or with no
// key all of them, encoded.
func (s *State) keyOf(v rowValues) string {
	var b []byte
	add := func(x value) {
		b = append(b, byte(x.kind))
		b = strconv.AppendInt(b, int64(len(x.text)), 10)
		b = append(b, ':')
		b = append(b, x.text...)
	}
	if len(s.key) == 0 {
		for _, x := range v {
			add(x)
		}
	} else {
		for _, i := range s.key {
			add(v[i])
		}
	}
	return string(b)
}

// keyText is v's key columns, for a message (with a key).
func (s *State) keyText(v rowValues) string {
	parts := make([]string, len(s.key))
	for j, i := range s.key {
		parts[j] = s.columns[i] + "=" + v[i].String()
	}
	return "key (" + strings.Join(parts, ", ") + ")"
}

func (s *State) add(v rowValues) error {
	k := s.keyOf(v)
	e := s.rows[k]
	switch {
	case e == nil:
		s.rows[k] = &entry{row: v, count: 1}
	case len(s.key) == 0:
		e.count++
	default:
		return fmt.Errorf("add of %s, which holds %s already (a duplicated transition): %s", s.keyText(v), e.row, v)
	}
	s.n++
	return nil
}

func (s *State) retract(v rowValues) error {
	k := s.keyOf(v)
	e := s.rows[k]
	switch {
	case e == nil && len(s.key) == 0:
		return fmt.Errorf("retraction of row %s, which is not there (a lost or duplicated transition)", v)
	case e == nil:
		return fmt.Errorf("retraction of %s, which holds no row (a lost or duplicated transition): %s", s.keyText(v), v)
	case !slices.Equal(e.row, v):
		return fmt.Errorf("retraction of %s, whose row is %s, not %s (a lost transition)", s.keyText(v), e.row, v)
	}
	if e.count--; e.count == 0 {
		delete(s.rows, k)
	}
	s.n--
	return nil
}

// members is a row object's members, in order.
type members struct {
	names  []string
	values rowValues
}

// parseEnvelope reads a Debezium envelope: its op and its before and after
// rows (nil when null or absent). Other members are skipped.
func parseEnvelope(line string) (op string, before, after *members, err error) {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if err := delim(dec, '{'); err != nil {
		return "", nil, nil, err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", nil, nil, badJSON(err)
		}
		name := tok.(string) // a member name: the decoder checks the syntax
		if seen[name] {
			return "", nil, nil, fmt.Errorf("member %q twice", name)
		}
		seen[name] = true
		switch name {
		case "before", "after":
			m, err := parseRow(dec)
			if err != nil {
				return "", nil, nil, fmt.Errorf("%s: %w", name, err)
			}
			if name == "before" {
				before = m
			} else {
				after = m
			}
		case "op":
			tok, err := dec.Token()
			if err != nil {
				return "", nil, nil, badJSON(err)
			}
			s, ok := tok.(string)
			if !ok {
				return "", nil, nil, fmt.Errorf("op %v is not a string", tok)
			}
			op = s
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", nil, nil, badJSON(err)
			}
		}
	}
	if err := delim(dec, '}'); err != nil {
		return "", nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", nil, nil, errors.New("malformed JSON: text after the envelope")
	}
	if !seen["op"] {
		return "", nil, nil, errors.New("no op")
	}
	return op, before, after, nil
}

func badJSON(err error) error { return fmt.Errorf("malformed JSON: %w", err) }

func delim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	switch {
	case err == io.EOF:
		return fmt.Errorf("malformed JSON: want %q, got the end", d)
	case err != nil:
		return badJSON(err)
	case tok != d:
		return fmt.Errorf("malformed JSON: want %q, got %v", d, tok)
	}
	return nil
}

// parseRow reads a row object, or null (nil).
func parseRow(dec *json.Decoder) (*members, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, badJSON(err)
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("want a row object or null, got %v", tok)
	}
	m := &members{names: []string{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, badJSON(err)
		}
		name := tok.(string)
		if slices.Contains(m.names, name) {
			return nil, fmt.Errorf("column %q twice", name)
		}
		if tok, err = dec.Token(); err != nil {
			return nil, badJSON(err)
		}
		var v value
		switch t := tok.(type) {
		case nil:
		case string:
			v = value{str, t}
		case json.Number:
			v = value{number, string(t)}
		case bool:
			v = value{boolean, "f"}
			if t {
				v.text = "t"
			}
		default:
			return nil, fmt.Errorf("column %q: a nested %v, not a value", name, t)
		}
		m.names = append(m.names, name)
		m.values = append(m.values, v)
	}
	if err := delim(dec, '}'); err != nil {
		return nil, err
	}
	return m, nil
}
