package compile

import (
	"errors"
	"fmt"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	pgparser "github.com/pganalyze/pg_query_go/v6/parser"
)

// The script layer: PostgreSQL's grammar (libpg_query) parses every query
// and expression, but not the streaming DDL around them — CREATE SOURCE,
// CREATE SINK, WATERMARK FOR, computed columns, WITH options whose keys
// have dots or quotes, FORMAT … ENCODE. This layer finds those clauses
// with PostgreSQL's own scanner (so strings, comments and quoted names are
// tokenized as PostgreSQL does), takes what they say, and blanks them out
// with spaces — replacing SOURCE by TABLE and SINK by VIEW — so that what
// is left is PostgreSQL and parses with every position unchanged: errors
// and plans point into the script the user wrote.

// Error is a problem in a script, at a 1-based line and column.
type Error struct {
	Line, Col int
	Msg       string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg) }

// script is the text being compiled, for turning offsets into positions.
type script struct {
	src string
	// out is the PostgreSQL text being made of src by prepare.
	out []byte
}

// errAt is an error at byte offset off of the script.
func (s *script) errAt(off int, format string, args ...any) *Error {
	if off < 0 {
		off = 0
	}
	if off > len(s.src) {
		off = len(s.src)
	}
	line, col := 1, 1
	for _, r := range s.src[:off] {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &Error{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

type token struct {
	start, end int
	text       string
	// word is the token upper-cased when it is a keyword or an unquoted
	// identifier, "" otherwise.
	word string
	kind pg.Token
}

func (t token) is(word string) bool { return t.word == word }

// option is one key = 'value' of a WITH clause.
type option struct {
	key, value string
	off        int
}

// computed is a column defined by an expression (`p_time AS PROCTIME()`).
type computed struct {
	name     string
	off      int
	exprText string // the script with everything but the expression blanked
}

// ddl is what the script layer took from one statement.
type ddl struct {
	kind string // "source" (CREATE SOURCE, CREATE TABLE), "sink", "view", "insert", "select"
	name string
	off  int
	// options of WITH (…); format and encode of FORMAT x ENCODE y (or
	// ROW FORMAT y).
	options        []option
	format, encode string
	// watermark: the column and its expression's text (blanked script).
	watermarkCol, watermarkExpr string
	watermarkOff                int
	computed                    []computed
	// sinkFrom is CREATE SINK name FROM relation's relation.
	sinkFrom    string
	sinkFromOff int
	explain     bool
	// setKey and setValue are SET key = value's.
	setKey, setValue string
	setValueOff      int
	// stmtStart, stmtEnd delimit the statement in the script.
	stmtStart, stmtEnd int
}

// prepare scans src, takes the streaming DDL out of each statement and
// returns PostgreSQL text of the same length, and what it took per
// statement, in order.
func (s *script) prepare() (string, []*ddl, error) {
	res, err := pg.Scan(s.src)
	if err != nil {
		return "", nil, s.pgError(err)
	}
	var toks []token
	for _, t := range res.Tokens {
		if t.Token == pg.Token_SQL_COMMENT || t.Token == pg.Token_C_COMMENT {
			continue
		}
		tk := token{start: int(t.Start), end: int(t.End), kind: t.Token}
		tk.text = s.src[tk.start:tk.end]
		if t.KeywordKind != pg.KeywordKind_NO_KEYWORD || (t.Token == pg.Token_IDENT && !strings.HasPrefix(tk.text, `"`)) {
			tk.word = strings.ToUpper(tk.text)
		}
		toks = append(toks, tk)
	}
	out := []byte(s.src)
	s.out = out
	blank := func(from, to int) {
		for i := from; i < to; i++ {
			if out[i] != '\n' {
				out[i] = ' '
			}
		}
	}
	var stmts []*ddl
	for len(toks) > 0 {
		n := 0
		for n < len(toks) && toks[n].text != ";" {
			n++
		}
		st := toks[:n]
		if n < len(toks) {
			toks = toks[n+1:]
		} else {
			toks = nil
		}
		if len(st) == 0 {
			continue
		}
		d, err := s.statement(st, blank, out)
		if err != nil {
			return "", nil, err
		}
		stmts = append(stmts, d)
	}
	return string(out), stmts, nil
}

func (s *script) pgError(err error) error {
	var pe *pgparser.Error
	if errors.As(err, &pe) {
		off := pe.Cursorpos - 1
		return s.errAt(off, "%s", pe.Message)
	}
	return &Error{Line: 1, Col: 1, Msg: err.Error()}
}

// statement reads one statement's tokens.
func (s *script) statement(st []token, blank func(int, int), out []byte) (*ddl, error) {
	d := &ddl{off: st[0].start, stmtStart: st[0].start, stmtEnd: st[len(st)-1].end}
	if st[0].is("EXPLAIN") {
		d.explain = true
		blank(st[0].start, st[0].end)
		st = st[1:]
		if len(st) == 0 {
			return nil, s.errAt(d.off, "EXPLAIN of nothing")
		}
		d.stmtStart = st[0].start
	}
	switch {
	case st[0].is("SET"):
		// SET key = value (or TO), the key dotted names or a quoted
		// string (Flink's SET 'table.exec.state.ttl' = '1 h'): none of
		// it is left for PostgreSQL.
		d.kind = "set"
		blank(st[0].start, st[len(st)-1].end)
		if d.explain {
			return nil, s.errAt(d.off, "EXPLAIN SET: nothing to explain")
		}
		i := 1
		var key strings.Builder
		for i < len(st) && st[i].text != "=" && !st[i].is("TO") {
			key.WriteString(strings.Trim(unquote(st[i].text), `"`))
			i++
		}
		if i >= len(st)-1 || key.Len() == 0 {
			return nil, s.errAt(d.off, "SET wants key = 'value'")
		}
		if i+2 != len(st) {
			return nil, s.errAt(st[i+1].start, "SET %s: one value, quoted", key.String())
		}
		d.setKey, d.setValue, d.setValueOff = strings.ToLower(key.String()), unquote(st[i+1].text), st[i+1].start
		return d, nil
	case st[0].is("SELECT") || st[0].is("WITH") || st[0].text == "(" || st[0].is("VALUES"):
		d.kind = "select"
		return d, nil
	case st[0].is("INSERT"):
		d.kind = "insert"
		return d, nil
	case !st[0].is("CREATE"):
		return nil, s.errAt(st[0].start, "unsupported statement %s: want CREATE SOURCE, CREATE TABLE, CREATE VIEW, CREATE SINK, INSERT INTO, SELECT or EXPLAIN", st[0].text)
	}
	i := 1
	if i+1 < len(st) && st[i].is("OR") && st[i+1].is("REPLACE") {
		i += 2
	}
	if i >= len(st) {
		return nil, s.errAt(st[0].start, "CREATE of nothing")
	}
	switch {
	case st[i].is("SOURCE"), st[i].is("TABLE"):
		d.kind = "source"
		if st[i].is("SOURCE") {
			copy(out[st[i].start:], "TABLE ")
		}
		return d, s.source(d, st, i+1, blank)
	case st[i].is("SINK"):
		d.kind = "sink"
		copy(out[st[i].start:], "VIEW")
		return d, s.sink(d, st, i+1, blank)
	case st[i].is("VIEW"):
		d.kind = "view"
		return d, nil
	case st[i].is("MATERIALIZED"):
		return nil, s.errAt(st[i].start, "CREATE MATERIALIZED VIEW is not supported: results that update (a materialized view's changelog) are not supported yet; write CREATE SINK name AS SELECT … instead")
	}
	return nil, s.errAt(st[i].start, "unsupported statement CREATE %s: want CREATE SOURCE, CREATE TABLE, CREATE VIEW or CREATE SINK", st[i].text)
}

// source reads CREATE SOURCE|TABLE name (columns…) [WITH (…)] [FORMAT x
// ENCODE y | ROW FORMAT y] from token i (the name).
func (s *script) source(d *ddl, st []token, i int, blank func(int, int)) error {
	if i >= len(st) || st[i].kind != pg.Token_IDENT && st[i].word == "" {
		return s.errAt(st[len(st)-1].end, "CREATE SOURCE needs a name")
	}
	d.name, d.off = identText(st[i]), st[i].start
	i++
	if i < len(st) && st[i].text == "(" {
		end, err := s.matching(st, i)
		if err != nil {
			return err
		}
		// PRIMARY KEY … NOT ENFORCED (Flink's): PostgreSQL's keys are
		// enforced, and Weir's are not, so the words go.
		for k := i + 1; k+1 < end; k++ {
			if st[k].is("NOT") && st[k+1].is("ENFORCED") {
				blank(st[k].start, st[k+1].end)
			}
		}
		if err := s.columns(d, st[i+1:end], blank); err != nil {
			return err
		}
		i = end + 1
	} else {
		return s.errAt(d.off, "CREATE SOURCE %s needs its columns: (name type, …)", d.name)
	}
	return s.tail(d, st, i, blank)
}

// columns takes WATERMARK FOR and computed columns out of a column list.
func (s *script) columns(d *ddl, cols []token, blank func(int, int)) error {
	for len(cols) > 0 {
		n, depth := 0, 0
		for n < len(cols) {
			switch cols[n].text {
			case "(", "[":
				depth++
			case ")", "]":
				depth--
			case ",":
				if depth == 0 {
					goto split
				}
			}
			n++
		}
	split:
		el := cols[:n]
		// the comma before or after an element blanked with it
		commaAfter := n < len(cols)
		rest := []token(nil)
		if commaAfter {
			rest = cols[n+1:]
		}
		switch {
		case len(el) > 0 && el[0].is("WATERMARK"):
			if len(el) < 5 || !el[1].is("FOR") || !el[3].is("AS") {
				return s.errAt(el[0].start, "WATERMARK wants: WATERMARK FOR column AS expression")
			}
			if d.watermarkCol != "" {
				return s.errAt(el[0].start, "a source has one WATERMARK")
			}
			d.watermarkCol, d.watermarkOff = identText(el[2]), el[2].start
			d.watermarkExpr = s.exprOnly(el[4].start, el[len(el)-1].end)
			s.blankElement(el, commaAfter, cols, n, blank)
		default:
			for k := 1; k < len(el); k++ {
				if el[k].is("AS") {
					c := computed{name: identText(el[0]), off: el[0].start}
					if k+1 >= len(el) {
						return s.errAt(el[k].end, "computed column %s needs an expression after AS", c.name)
					}
					c.exprText = s.exprOnly(el[k+1].start, el[len(el)-1].end)
					d.computed = append(d.computed, c)
					s.blankElement(el, commaAfter, cols, n, blank)
					break
				}
			}
		}
		cols = rest
	}
	return nil
}

// blankElement blanks a column list element and one comma next to it.
func (s *script) blankElement(el []token, commaAfter bool, cols []token, n int, blank func(int, int)) {
	blank(el[0].start, el[len(el)-1].end)
	if commaAfter {
		blank(cols[n].start, cols[n].end)
		return
	}
	// the last element: blank the comma before it, if any, which is
	// the character run before el[0] back to a ','.
	for i := el[0].start - 1; i >= 0; i-- {
		c := s.out[i]
		if c == ',' {
			blank(i, i+1)
			return
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return
		}
	}
}

// exprOnly is the script with all but [start, end) blanked and SELECT
// written just before it, so PostgreSQL parses the expression alone with
// its positions in the script.
func (s *script) exprOnly(start, end int) string {
	b := []byte(strings.Repeat(" ", len(s.src)))
	for i := range b {
		if s.src[i] == '\n' {
			b[i] = '\n'
		}
	}
	copy(b[start:end], s.src[start:end])
	// Room for "SELECT " before start: the clause's keywords were
	// longer than that (WATERMARK FOR col AS, name AS).
	p := max(0, start-7)
	copy(b[p:], "SELECT ")
	return string(b)
}

// sink reads CREATE SINK name AS query WITH (…) | CREATE SINK name FROM
// relation WITH (…) from token i (the name).
func (s *script) sink(d *ddl, st []token, i int, blank func(int, int)) error {
	if i >= len(st) {
		return s.errAt(st[len(st)-1].end, "CREATE SINK needs a name")
	}
	d.name, d.off = identText(st[i]), st[i].start
	i++
	if i >= len(st) {
		return s.errAt(st[i-1].end, "CREATE SINK %s needs AS query or FROM relation", d.name)
	}
	// The options: the last top-level WITH ( … ) that runs to the end
	// (or to FORMAT … ENCODE …).
	end := len(st)
	depth := 0
	for k := len(st) - 1; k > i && depth >= 0; k-- {
		switch {
		case st[k].text == ")":
			depth++
		case st[k].text == "(":
			depth--
		case depth == 0 && st[k].is("FORMAT"):
			end = k
			if st[k-1].is("ROW") {
				end = k - 1
			}
			k = i // found
		}
	}
	withAt := -1
	if end > 0 && st[end-1].text == ")" {
		open, err := s.opening(st[:end], end-1)
		if err != nil {
			return err
		}
		if open > 0 && st[open-1].is("WITH") {
			withAt = open - 1
		}
	}
	if st[i].is("FROM") {
		if i+1 >= len(st) {
			return s.errAt(st[i].end, "CREATE SINK %s FROM needs a relation", d.name)
		}
		d.sinkFrom, d.sinkFromOff = identText(st[i+1]), st[i+1].start
		stop := len(st)
		if withAt >= 0 {
			stop = withAt
		}
		if i+2 < stop {
			return s.errAt(st[i+2].start, "CREATE SINK %s FROM %s: unexpected %s", d.name, d.sinkFrom, st[i+2].text)
		}
		// Nothing of it is PostgreSQL: the statement is blanked whole
		// below (the tail) and here.
		blank(st[0].start, st[i+1].end)
		d.kind = "sink"
	} else if !st[i].is("AS") {
		return s.errAt(st[i].start, "CREATE SINK %s: want AS query or FROM relation, got %s", d.name, st[i].text)
	}
	if withAt < 0 {
		if end < len(st) {
			return s.tail(d, st, end, blank)
		}
		return nil
	}
	return s.tail(d, st, withAt, blank)
}

// tail reads [WITH (…)] [FORMAT x ENCODE y | ROW FORMAT y] from token i
// to the end of the statement, and blanks it.
func (s *script) tail(d *ddl, st []token, i int, blank func(int, int)) error {
	if i >= len(st) {
		return nil
	}
	blank(st[i].start, st[len(st)-1].end)
	if st[i].is("WITH") {
		if i+1 >= len(st) || st[i+1].text != "(" {
			return s.errAt(st[i].end, "WITH wants (key = 'value', …)")
		}
		end, err := s.matching(st, i+1)
		if err != nil {
			return err
		}
		if err := s.options(d, st[i+2:end], st[i+1]); err != nil {
			return err
		}
		i = end + 1
	}
	if i < len(st) && st[i].is("ROW") && i+2 < len(st) && st[i+1].is("FORMAT") {
		d.format, d.encode = "PLAIN", strings.ToUpper(st[i+2].text)
		i += 3
	} else if i < len(st) && st[i].is("FORMAT") {
		if i+3 >= len(st) || !st[i+2].is("ENCODE") {
			return s.errAt(st[i].start, "FORMAT wants FORMAT PLAIN ENCODE JSON|CSV")
		}
		d.format, d.encode = strings.ToUpper(st[i+1].text), strings.ToUpper(st[i+3].text)
		i += 4
	}
	if i < len(st) {
		return s.errAt(st[i].start, "unexpected %s after the options", st[i].text)
	}
	return nil
}

// options reads key = value, … where a key is names joined by dots or a
// quoted string, and a value a string, number or name.
func (s *script) options(d *ddl, toks []token, open token) error {
	for len(toks) > 0 {
		var key strings.Builder
		k := 0
		off := toks[0].start
		for k < len(toks) && toks[k].text != "=" {
			t := toks[k]
			switch {
			case t.text == ".":
				key.WriteByte('.')
			case t.kind == pg.Token_SCONST:
				key.WriteString(unquote(t.text))
			case t.word != "" || t.kind == pg.Token_IDENT:
				key.WriteString(identText(t))
			default:
				return s.errAt(t.start, "option key: unexpected %s", t.text)
			}
			k++
		}
		if k == len(toks) || key.Len() == 0 {
			return s.errAt(off, "an option wants key = 'value'")
		}
		if k+1 >= len(toks) {
			return s.errAt(toks[k].end, "option %s has no value", key.String())
		}
		v := toks[k+1]
		val := v.text
		if v.kind == pg.Token_SCONST {
			val = unquote(v.text)
		}
		for _, o := range d.options {
			if o.key == strings.ToLower(key.String()) {
				return s.errAt(off, "option %s given twice", key.String())
			}
		}
		d.options = append(d.options, option{key: strings.ToLower(key.String()), value: val, off: off})
		toks = toks[k+2:]
		if len(toks) > 0 {
			if toks[0].text != "," {
				return s.errAt(toks[0].start, "options are separated by commas, got %s", toks[0].text)
			}
			toks = toks[1:]
		}
	}
	return nil
}

// matching is the index of the parenthesis closing the one at i.
func (s *script) matching(st []token, i int) (int, error) {
	depth := 0
	for k := i; k < len(st); k++ {
		switch st[k].text {
		case "(":
			depth++
		case ")":
			depth--
			if depth == 0 {
				return k, nil
			}
		}
	}
	return 0, s.errAt(st[i].start, "unbalanced parenthesis")
}

// opening is the index of the parenthesis that the one at i closes.
func (s *script) opening(st []token, i int) (int, error) {
	depth := 0
	for k := i; k >= 0; k-- {
		switch st[k].text {
		case ")":
			depth++
		case "(":
			depth--
			if depth == 0 {
				return k, nil
			}
		}
	}
	return 0, s.errAt(st[i].start, "unbalanced parenthesis")
}

// identText is a name as PostgreSQL folds it: unquoted lower-cased.
func identText(t token) string {
	if strings.HasPrefix(t.text, `"`) {
		return strings.ReplaceAll(t.text[1:len(t.text)-1], `""`, `"`)
	}
	return strings.ToLower(t.text)
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	}
	if len(s) >= 3 && (s[0] == 'E' || s[0] == 'e') && s[1] == '\'' {
		return strings.ReplaceAll(s[2:len(s)-1], "''", "'")
	}
	return s
}
