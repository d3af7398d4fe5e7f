package compile

import (
	"fmt"
	"sort"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/weirproject/weir/internal/sql/plan"
)

// source is a CREATE SOURCE (or a CREATE TABLE read from).
type source struct {
	name    string
	off     int
	cols    plan.Schema
	options map[string]option
	encode  string // JSON or CSV, for connectors that carry text
	// rowtime is the column WATERMARK FOR names (-1: none) and delay its
	// out-of-orderness in ms; proctime a PROCTIME() column (-1: none).
	rowtime  int
	delay    int64
	proctime int
	// idle and wmInterval are the watermark's idle timeout and interval
	// (options watermark.idle_timeout, watermark.interval; 0: defaults).
	idle, wmInterval time.Duration
	// operator and config are the connector's vertex when read.
	operator string
	config   map[string]any
	// pk is the PRIMARY KEY … NOT ENFORCED the table declares, which a
	// sink writing it keys its records by (nil: none).
	pk    []string
	pkOff int
	// upsert: the source is an upsert stream of its primary key (FORMAT
	// UPSERT): a message is its key's latest row, an empty one deletes.
	upsert bool
	// readErr is why the table cannot be read, found when it was
	// declared (its options are a sink's).
	readErr error
}

// view is a CREATE VIEW (or CREATE SINK … AS query's query).
type view struct {
	name  string
	query *pg.SelectStmt
}

// catalog is what a script declared so far.
type catalog struct {
	sources map[string]*source
	views   map[string]*view
}

func (c *catalog) names() []string {
	var ns []string
	for n := range c.sources {
		ns = append(ns, n)
	}
	for n := range c.views {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// typeOf maps a PostgreSQL type name to a SQL type.
func typeOf(tn *pg.TypeName) (plan.Type, error) {
	var names []string
	for _, n := range tn.Names {
		names = append(names, n.GetString_().GetSval())
	}
	name := names[len(names)-1]
	if len(tn.ArrayBounds) > 0 {
		return plan.Type{}, fmt.Errorf("type %s[]: arrays are not supported", name)
	}
	switch strings.ToLower(name) {
	case "bool", "boolean":
		return plan.Type{Kind: plan.Bool}, nil
	case "int2", "smallint":
		return plan.Type{Kind: plan.Int16}, nil
	case "int4", "int", "integer":
		return plan.Type{Kind: plan.Int32}, nil
	case "int8", "bigint":
		return plan.Type{Kind: plan.Int64}, nil
	case "float4", "real":
		return plan.Type{Kind: plan.Float32}, nil
	case "float8", "double":
		return plan.Type{Kind: plan.Float64}, nil
	case "numeric", "decimal":
		scale := int8(0)
		if len(tn.Typmods) == 2 {
			s := tn.Typmods[1].GetAConst().GetIval().GetIval()
			if s < 0 || s > 18 {
				return plan.Type{}, fmt.Errorf("NUMERIC scale %d: at most 18 digits after the point", s)
			}
			scale = int8(s)
		} else if len(tn.Typmods) == 0 {
			// PostgreSQL's unconstrained NUMERIC has any scale; ours
			// is fixed per column, and 6 digits keeps money and
			// ratios exact enough while leaving 12 before the point.
			scale = 6
		}
		return plan.Type{Kind: plan.Decimal, Scale: scale}, nil
	case "varchar", "text", "bpchar", "char", "string":
		return plan.Type{Kind: plan.Varchar}, nil
	case "date":
		return plan.Type{Kind: plan.Date}, nil
	case "timestamp":
		return plan.Type{Kind: plan.Timestamp}, nil
	case "timestamptz":
		return plan.Type{Kind: plan.TimestampTZ}, nil
	case "interval":
		return plan.Type{Kind: plan.Interval}, nil
	}
	return plan.Type{}, fmt.Errorf("type %s is not supported (want SMALLINT, INT, BIGINT, REAL, DOUBLE PRECISION, NUMERIC, VARCHAR, BOOLEAN, DATE, TIMESTAMP, TIMESTAMPTZ or INTERVAL)", name)
}

// closest is the names of cands nearest to name, for "did you mean".
func closest(name string, cands []string) []string {
	type scored struct {
		s string
		d int
	}
	var ss []scored
	for _, c := range cands {
		d := levenshtein(strings.ToLower(name), strings.ToLower(c))
		if d <= max(2, len(name)/3) || strings.Contains(c, name) || strings.Contains(name, c) {
			ss = append(ss, scored{c, d})
		}
	}
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].d < ss[j].d })
	var out []string
	for i := 0; i < len(ss) && i < 3; i++ {
		out = append(out, ss[i].s)
	}
	return out
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// didYouMean is " (did you mean a or b?)" or "".
func didYouMean(name string, cands []string) string {
	c := closest(name, cands)
	if len(c) == 0 {
		if len(cands) > 0 && len(cands) <= 12 {
			return " (have: " + strings.Join(cands, ", ") + ")"
		}
		return ""
	}
	return " (did you mean " + strings.Join(c, " or ") + "?)"
}
