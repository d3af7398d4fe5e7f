package expr

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// resolveConcatOp types ||: two values of any types, as text.
func resolveConcatOp(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) != 2 {
		return nil, varchar, undefined(fn, args)
	}
	return args, varchar, nil
}

// resolveConcat types concat: values of any types, as text.
func resolveConcat(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) == 0 {
		return nil, varchar, undefined(fn, args)
	}
	return args, varchar, nil
}

// compileConcat is || (NULL if an argument is) and concat (which skips
// NULLs), of the arguments' text as PostgreSQL prints them.
func compileConcat(c *call) (Eval, error) {
	args, types, strict := c.evals, c.types, c.fn == "||"
	return func(r row.Row) (row.Value, error) {
		var buf [128]byte
		b := buf[:0]
		for i, a := range args {
			v, err := a(r)
			if err != nil {
				return v, err
			}
			if v.IsNull() {
				if strict {
					return v, nil
				}
				continue
			}
			b = row.AppendText(b, types[i], v)
		}
		return row.Str(string(b)), nil
	}, nil
}

// strFunc is a strict function of up to 3 arguments, n of them; f
// takes them in an array, which stays on the stack.
func strFunc(c *call, f func(a [3]row.Value, n int) (row.Value, error)) Eval {
	args := c.evals
	return func(r row.Row) (row.Value, error) {
		var vals [3]row.Value
		for i, a := range args {
			v, err := a(r)
			if err != nil || v.IsNull() {
				return v, err
			}
			vals[i] = v
		}
		return f(vals, len(args))
	}
}

func compileCase1(c *call) (Eval, error) {
	conv := strings.ToLower
	if c.fn == "upper" {
		conv = strings.ToUpper
	}
	return unary(c.evals[0], func(x row.Value) (row.Value, error) { return row.Str(conv(x.Str())), nil }), nil
}

func compileCharLength(c *call) (Eval, error) {
	return unary(c.evals[0], func(x row.Value) (row.Value, error) {
		return row.Int(int64(utf8.RuneCountInString(x.Str()))), nil
	}), nil
}

// compileSubstr is substr(s, start[, count]) of characters, 1-based, as
// PostgreSQL's: positions before 1 count, but take nothing.
func compileSubstr(c *call) (Eval, error) {
	return strFunc(c, func(a [3]row.Value, n int) (row.Value, error) {
		s, from := a[0].Str(), a[1].Int()
		to := int64(math.MaxInt64) // exclusive
		if n == 3 {
			count := a[2].Int()
			if count < 0 {
				return row.Value{}, errors.New("negative substring length not allowed")
			}
			if to = from + count; to < from {
				to = math.MaxInt64
			}
		}
		from = max(from, 1)
		if to <= from {
			return row.Str(""), nil
		}
		start, end, pos := len(s), len(s), int64(1)
		for i := range s {
			if pos == from {
				start = i
			}
			if pos == to {
				end = i
				break
			}
			pos++
		}
		return row.Str(s[min(start, end):end]), nil
	}), nil
}

// compileSplitPart is split_part(s, delimiter, n) as PostgreSQL 14's: the
// nth field, counted from the end when negative; empty when there is
// none.
func compileSplitPart(c *call) (Eval, error) {
	return strFunc(c, func(a [3]row.Value, _ int) (row.Value, error) {
		s, delim, field := a[0].Str(), a[1].Str(), a[2].Int()
		switch {
		case field == 0:
			return row.Value{}, errors.New("field position must not be zero")
		case s == "":
			return row.Str(""), nil
		case delim == "":
			if field == 1 || field == -1 {
				return row.Str(s), nil
			}
			return row.Str(""), nil
		case field < 0:
			// Count fields from the end: the -nth from the last.
			for ; field < -1; field++ {
				i := strings.LastIndex(s, delim)
				if i < 0 {
					return row.Str(""), nil
				}
				s = s[:i]
			}
			if i := strings.LastIndex(s, delim); i >= 0 {
				s = s[i+len(delim):]
			}
			return row.Str(s), nil
		}
		for ; field > 1; field-- {
			i := strings.Index(s, delim)
			if i < 0 {
				return row.Str(""), nil
			}
			s = s[i+len(delim):]
		}
		if i := strings.Index(s, delim); i >= 0 {
			s = s[:i]
		}
		return row.Str(s), nil
	}), nil
}

// compileTrim is trim (btrim), ltrim and rtrim: of spaces, or of the
// characters of the second argument.
func compileTrim(c *call) (Eval, error) {
	trim := map[string]func(string, string) string{"trim": strings.Trim, "ltrim": strings.TrimLeft, "rtrim": strings.TrimRight}[c.fn]
	return strFunc(c, func(a [3]row.Value, n int) (row.Value, error) {
		chars := " "
		if n == 2 {
			chars = a[1].Str()
		}
		return row.Str(trim(a[0].Str(), chars)), nil
	}), nil
}

func compileReplace(c *call) (Eval, error) {
	return strFunc(c, func(a [3]row.Value, _ int) (row.Value, error) {
		if a[1].Str() == "" {
			return a[0], nil
		}
		return row.Str(strings.ReplaceAll(a[0].Str(), a[1].Str(), a[2].Str())), nil
	}), nil
}

// compilePosition is position(s, sub) — SQL's POSITION(sub IN s), whose
// arguments PostgreSQL's parser swaps into this order: sub's first
// character's position in s, from 1; 0 when s does not hold it.
func compilePosition(c *call) (Eval, error) {
	return strFunc(c, func(a [3]row.Value, _ int) (row.Value, error) {
		s := a[0].Str()
		i := strings.Index(s, a[1].Str())
		if i < 0 {
			return row.Int(0), nil
		}
		return row.Int(int64(utf8.RuneCountInString(s[:i])) + 1), nil
	}), nil
}

// compileLike is LIKE, NOT LIKE and ILIKE: % any characters, _ one,
// backslash escaping the next. A constant pattern is compiled here once.
func compileLike(c *call) (Eval, error) {
	fold, negate := c.fn == "ilike", c.fn == "not_like"
	match := func(s string, p likePattern) row.Value { return row.Bool(p.match(s, fold) != negate) }
	if v, ok := c.constArg(1); ok && !v.IsNull() {
		p, err := compileLikePattern(v.Str(), fold)
		if err != nil {
			return nil, err
		}
		return unary(c.evals[0], func(x row.Value) (row.Value, error) { return match(x.Str(), p), nil }), nil
	}
	return binary(c.evals[0], c.evals[1], func(x, y row.Value) (row.Value, error) {
		p, err := compileLikePattern(y.Str(), fold)
		if err != nil {
			return row.Value{}, err
		}
		return match(x.Str(), p), nil
	}), nil
}

// likeToken is one character of a LIKE pattern, or a wildcard.
type likeToken struct {
	r    rune
	kind uint8
}

const (
	likeLiteral uint8 = iota
	likeOne           // _
	likeAny           // %
)

// likePattern is a compiled LIKE pattern; plain, when set, is a pattern
// with no _ and % only at its ends, matched by string search.
type likePattern struct {
	tokens      []likeToken
	plain       *string
	prefix, suf bool // plain: a leading %, a trailing %
}

func compileLikePattern(p string, fold bool) (likePattern, error) {
	var lp likePattern
	var lit strings.Builder
	wild := 0
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		i += size
		switch r {
		case '\\':
			if i == len(p) {
				return lp, errors.New("LIKE pattern must not end with escape character")
			}
			r, size = utf8.DecodeRuneInString(p[i:])
			i += size
		case '%':
			lp.tokens = append(lp.tokens, likeToken{kind: likeAny})
			wild++
			continue
		case '_':
			lp.tokens = append(lp.tokens, likeToken{kind: likeOne})
			wild += 1 << 16 // never plain
			continue
		}
		if fold {
			r = unicode.ToLower(r)
		}
		lp.tokens = append(lp.tokens, likeToken{r: r, kind: likeLiteral})
		lit.WriteRune(r)
	}
	n := len(lp.tokens)
	lp.prefix = n > 0 && lp.tokens[0].kind == likeAny
	lp.suf = n > 1 && lp.tokens[n-1].kind == likeAny
	if !fold && wild == btoi(lp.prefix)+btoi(lp.suf) {
		s := lit.String()
		lp.plain = &s
	}
	return lp, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (p likePattern) match(s string, fold bool) bool {
	if lit := p.plain; lit != nil {
		switch {
		case p.prefix && p.suf:
			return strings.Contains(s, *lit)
		case p.prefix:
			return strings.HasSuffix(s, *lit)
		case p.suf:
			return strings.HasPrefix(s, *lit)
		}
		return s == *lit
	}
	// The classic wildcard match: on a mismatch, let the last % take
	// one more character and retry from there.
	tokens := p.tokens
	si, ti, star, mark := 0, 0, -1, 0
	for si < len(s) {
		r, size := utf8.DecodeRuneInString(s[si:])
		if fold {
			r = unicode.ToLower(r)
		}
		switch {
		case ti < len(tokens) && tokens[ti].kind == likeAny:
			star, mark = ti, si
			ti++
		case ti < len(tokens) && (tokens[ti].kind == likeOne || tokens[ti].r == r):
			si += size
			ti++
		case star >= 0:
			_, size = utf8.DecodeRuneInString(s[mark:])
			mark += size
			si, ti = mark, star+1
		default:
			return false
		}
	}
	for ti < len(tokens) && tokens[ti].kind == likeAny {
		ti++
	}
	return ti == len(tokens)
}

// compileRegexp is regexp_match_group(s, pattern, n), PostgreSQL's
// (regexp_match(s, pattern))[n] — the nth parenthesized group of the
// first match, or the whole match when the pattern has no groups and n
// is 1 — and regexp_extract(s, pattern, n), Flink's, where group 0 is the
// whole match. NULL without a match, or when the group took no part in
// it. Go's RE2 syntax stands in for PostgreSQL's; a constant pattern is
// compiled here once.
func compileRegexp(c *call) (Eval, error) {
	extract := c.fn == "regexp_extract"
	group := func(re *regexp.Regexp, s string, n int64) row.Value {
		m := re.FindStringSubmatchIndex(s)
		groups := int64(re.NumSubexp())
		switch {
		case m == nil:
			return row.Null()
		case extract && n == 0, !extract && groups == 0 && n == 1:
			return row.Str(s[m[0]:m[1]])
		case n < 1 || n > groups || m[2*n] < 0:
			return row.Null()
		}
		return row.Str(s[m[2*n]:m[2*n+1]])
	}
	if v, ok := c.constArg(1); ok && !v.IsNull() {
		re, err := compileRegexpPattern(v.Str())
		if err != nil {
			return nil, err
		}
		s, n := c.evals[0], c.evals[2]
		return binary(s, n, func(x, y row.Value) (row.Value, error) { return group(re, x.Str(), y.Int()), nil }), nil
	}
	return strFunc(c, func(a [3]row.Value, _ int) (row.Value, error) {
		re, err := compileRegexpPattern(a[1].Str())
		if err != nil {
			return row.Value{}, err
		}
		return group(re, a[0].Str(), a[2].Int()), nil
	}), nil
}

func compileRegexpPattern(p string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression: %w", err)
	}
	return re, nil
}
