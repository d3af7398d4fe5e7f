// Package plan is the compiled form of a SQL query as the runtime runs it:
// the types of SQL values, typed expressions over a row, and the
// configuration of each SQL operator a job graph vertex runs. The planner
// (package sql/compile, which links PostgreSQL's parser through cgo) writes
// it; the operators (package sql/ops) read it from their vertex's
// configuration and compile its expressions once into closures. It holds
// data only, JSON-encoded into the vertex configuration under the key
// "plan", so that the TaskManager links no parser.
package plan

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Kind is a SQL type's kind.
type Kind uint8

const (
	// Null is the type of the NULL literal before it meets a context.
	Null Kind = iota
	Bool
	Int16
	Int32
	Int64
	Float32
	Float64
	// Decimal is NUMERIC/DECIMAL: exact, a 64-bit mantissa scaled by
	// 10^-Scale (Type.Scale).
	Decimal
	Varchar
	// Date is days since 1970-01-01.
	Date
	// Timestamp and TimestampTZ are microseconds since the Unix epoch
	// (TimestampTZ's in UTC).
	Timestamp
	TimestampTZ
	// Interval is microseconds (months are not supported).
	Interval
)

var kindNames = [...]string{
	Null: "NULL", Bool: "BOOLEAN", Int16: "SMALLINT", Int32: "INTEGER", Int64: "BIGINT",
	Float32: "REAL", Float64: "DOUBLE PRECISION", Decimal: "NUMERIC", Varchar: "VARCHAR",
	Date: "DATE", Timestamp: "TIMESTAMP", TimestampTZ: "TIMESTAMPTZ", Interval: "INTERVAL",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Type is a SQL type.
type Type struct {
	Kind Kind `json:"k"`
	// Scale is a Decimal's number of digits after the point.
	Scale int8 `json:"s,omitempty"`
}

func (t Type) String() string {
	if t.Kind == Decimal {
		return fmt.Sprintf("NUMERIC(18,%d)", t.Scale)
	}
	return t.Kind.String()
}

// Numeric reports whether t is a number.
func (t Type) Numeric() bool {
	switch t.Kind {
	case Int16, Int32, Int64, Float32, Float64, Decimal:
		return true
	}
	return false
}

// Column is a named, typed column of a row.
type Column struct {
	Name string `json:"n"`
	Type Type   `json:"t"`
}

// Schema is the columns of a row, in order.
type Schema []Column

func (s Schema) String() string {
	parts := make([]string, len(s))
	for i, c := range s {
		parts[i] = c.Name + " " + c.Type.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// Op is what an expression node computes.
type Op string

const (
	// OpCol reads column Col of the row.
	OpCol Op = "col"
	// OpConst is the literal Lit of type Type (see Expr.Lit).
	OpConst Op = "const"
	// OpCall applies function Fn to Args. Operators are functions too:
	// "+", "-", "*", "/", "%", "neg", "=", "<>", "<", "<=", ">", ">=",
	// "and", "or", "not", "is_null", "is_not_null", "is_true",
	// "is_false", "like", "not_like", "ilike", "||", "in" (Args[0] in
	// Args[1:]), "case" (Args: when1, then1, …, else), "coalesce",
	// "cast" (to Type), and the named functions: lower, upper, substr,
	// concat, split_part, regexp_match_group (string, pattern, group
	// number: PostgreSQL's (regexp_match(s, p))[n]), regexp_extract,
	// char_length, date_trunc, extract (Args[0] the field as a Varchar
	// constant), to_char, now, abs, round, floor, ceil.
	OpCall Op = "call"
)

// Expr is a typed expression over one row. Arguments of an OpCall are of
// the types the function takes: the planner inserts casts, so the runtime
// never converts implicitly.
type Expr struct {
	Op   Op   `json:"op"`
	Type Type `json:"t"`
	Col  int  `json:"c,omitempty"`
	// Lit is a constant's canonical text: "" with Null=true is NULL;
	// booleans "true"/"false"; integers and Date/Timestamp/Interval as
	// their integer value (days, µs, µs); decimals as the integer
	// mantissa; floats as Go's strconv 'g' format; Varchar as itself.
	Lit    string `json:"l,omitempty"`
	IsNull bool   `json:"null,omitempty"`
	Fn     string `json:"fn,omitempty"`
	Args   []Expr `json:"a,omitempty"`
}

// ColRef is column i of type t.
func ColRef(i int, t Type) Expr { return Expr{Op: OpCol, Col: i, Type: t} }

// Call is fn(args…) of result type t.
func Call(fn string, t Type, args ...Expr) Expr { return Expr{Op: OpCall, Fn: fn, Type: t, Args: args} }

// Format is how rows are encoded in records.
type Format string

const (
	// FormatRow is the binary row encoding of package sql/row: a null
	// bitmap, then each non-null column by its type. Between SQL
	// operators.
	FormatRow Format = "row"
	// FormatCSV is one line of comma-separated PostgreSQL text values
	// (quoted as RFC 4180 when needed; NULL is empty), no newline.
	FormatCSV Format = "csv"
	// FormatJSON is one JSON object keyed by column name.
	FormatJSON Format = "json"
	// Inputs a SQL operator decodes from a connector's records: the
	// Nexmark source's binary events (the columns of RisingWave's
	// nexmark connector tables), the sequence source's key, value and
	// timestamp (k BIGINT, v BIGINT, ts TIMESTAMP).
	FormatNexmarkBid     Format = "nexmark-bid"
	FormatNexmarkAuction Format = "nexmark-auction"
	FormatNexmarkPerson  Format = "nexmark-person"
	FormatSequence       Format = "sequence"
)

// Encoding is how an operator writes the records it emits: the value's
// format, and which of the emitted columns make the record key (their
// row encoding, in order), by which the next vertex's hash edge
// partitions. No key columns: an empty key.
type Encoding struct {
	Format Format `json:"format"`
	Key    []int  `json:"key,omitempty"`
	// KeyFormat is the key's format when not FormatRow: a Kafka sink's
	// key as text (FormatCSV of the key columns) or JSON.
	KeyFormat Format `json:"keyFormat,omitempty"`
	// Changelog: the rows are a changelog stream's, each record's value
	// the row's kind (package sql/row's Kind byte) and then the row
	// (FormatRow only). Between SQL operators.
	Changelog bool `json:"changelog,omitempty"`
	// Sink is how the last operator before a sink writes a changelog
	// stream's rows (Changelog is then false): empty for an append-only
	// stream.
	Sink SinkMode `json:"sink,omitempty"`
}

// Mode is how a stream's rows change the result they make up (Flink's
// changelog mode), which the planner derives for every operator.
type Mode string

const (
	// AppendOnly: every row is an insert.
	AppendOnly Mode = "append-only"
	// Retract: rows carry their kind; an update is the old row (-U) and
	// then the new (+U), a delete (-D) carries the whole row.
	Retract Mode = "retract"
	// Upsert: rows carry their kind and a unique key; an update is the
	// new row alone, a delete needs only the key (an upsert Kafka
	// source's stream, before it is normalized).
	Upsert Mode = "upsert"
)

// SinkMode is how a changelog stream's rows become a sink's records.
type SinkMode string

const (
	// SinkForceAppend writes the rows that add (+I, +U) as plain rows and
	// drops the rest (RisingWave's force_append_only).
	SinkForceAppend SinkMode = "force-append"
	// SinkUpsert keys each record by the primary key (Encoding.Key):
	// +I and +U write the row, -D writes a tombstone (the key with no
	// value), and a -U is dropped when the +U of the same key follows it
	// (else it is a tombstone too).
	SinkUpsert SinkMode = "upsert"
	// SinkDebezium writes each row as a Debezium JSON envelope: adds as
	// {"before":null,"after":row,"op":"c"}, retractions as
	// {"before":row,"after":null,"op":"d"} (Flink's debezium-json).
	SinkDebezium SinkMode = "debezium"
	// SinkKindColumn writes each row in the row format with its kind
	// ("+I", "-U", "+U", "-D") as a first VARCHAR column named op: what a
	// terminal shows of a changelog.
	SinkKindColumn SinkMode = "kind-column"
)

// Decoding is how an operator reads its input records: their format and
// the schema it decodes them into. For FormatCSV and FormatJSON the
// schema's column names (JSON) and order (CSV) say where each value is.
type Decoding struct {
	Format Format `json:"format"`
	Schema Schema `json:"schema"`
	// Timestamp is a column filled from the record's timestamp (ms, as
	// µs), or -1: a Kafka source's event-time column, which is the
	// messages' timestamp, as the watermarks the source generates are.
	Timestamp int `json:"timestamp"`
	// Clock lists the columns the subtask's processing time fills
	// (PROCTIME() columns) when the format has no value for them.
	Clock []int `json:"clock,omitempty"`
	// Changelog: the records are a changelog stream's (Encoding's
	// Changelog), FormatRow only.
	Changelog bool `json:"changelog,omitempty"`
	// Key is an upsert source's primary key (Kafka's message key, its
	// columns in KeyFormat, CSV or JSON): a record is the latest row of
	// its key (read as +U), or, with an empty value, the key's deletion
	// (a tombstone, read as -D with only the key's columns).
	Key       []int  `json:"key,omitempty"`
	KeyFormat Format `json:"keyFormat,omitempty"`
}

// Operator is the configuration of one SQL vertex: exactly one of its
// fields is set.
type Operator struct {
	Calc      *Calc      `json:"calc,omitempty"`
	WindowAgg *WindowAgg `json:"windowAgg,omitempty"`
	// LocalAgg is the first phase of a two-phase window aggregate: the
	// subtask folds its own rows per group and pane, and emits each
	// pane's partial accumulator (the record value, keyed by the group)
	// when the watermark passes the pane's end, to the WindowAgg that
	// merges them (Partial). Its Output and Out are unused.
	LocalAgg  *WindowAgg `json:"localAgg,omitempty"`
	Join      *Join      `json:"join,omitempty"`
	GroupAgg  *GroupAgg  `json:"groupAgg,omitempty"`
	Normalize *Normalize `json:"normalize,omitempty"`
	TopN      *TopN      `json:"topN,omitempty"`
	OverAgg   *OverAgg   `json:"overAgg,omitempty"`
	Blackhole *Blackhole `json:"blackhole,omitempty"`
	Collect   *Collect   `json:"collect,omitempty"`
	// Describe is the part of the plan the vertex runs, for EXPLAIN, the
	// REST API and the dashboard.
	Describe string `json:"describe,omitempty"`
	// Mode is the changelog mode of the rows the vertex emits.
	Mode Mode `json:"mode,omitempty"`
}

// Calc decodes its input, keeps the rows Filter is true for, and emits
// Project of each (Flink's Calc: a projection and a filter, stateless).
type Calc struct {
	In Decoding `json:"in"`
	// Shared are expressions over the decoded row that Filter and
	// Project both use (or one of them twice): each is evaluated once per
	// row and appended to it, as column len(In.Schema)+i, before Filter
	// and Project run.
	Shared []Expr `json:"shared,omitempty"`
	Filter *Expr  `json:"filter,omitempty"`
	// Project computes the output columns from the input row; empty: the
	// input row as it is.
	Project []Expr   `json:"project,omitempty"`
	Out     Schema   `json:"outSchema"`
	Enc     Encoding `json:"out"`
}

// WindowKind is a window table function's shape.
type WindowKind string

const (
	Tumble  WindowKind = "tumble"
	Hop     WindowKind = "hop"
	Session WindowKind = "session"
)

// Window is the windows an aggregate or join groups rows in. Durations in
// milliseconds.
type Window struct {
	Kind WindowKind `json:"kind"`
	Size int64      `json:"size,omitempty"`
	// Slide is a hop's slide (Size for a tumble).
	Slide int64 `json:"slide,omitempty"`
	Gap   int64 `json:"gap,omitempty"`
	// ProcessingTime: windows follow the subtask's clock (a PROCTIME()
	// column), not the records' timestamps.
	ProcessingTime bool `json:"processingTime,omitempty"`
	// Cascade is set when the input rows are results of an upstream
	// window aggregate of the same windows (GROUP BY window_start of a
	// windowed relation): each row is stamped at its window's last
	// millisecond, so the operator runs tumbling windows of Slide and
	// reports window_start as window_end − Size.
	Cascade bool `json:"cascade,omitempty"`
}

// AggFunc is an aggregate function.
type AggFunc string

const (
	Count         AggFunc = "count" // count(*) when Arg is nil
	CountDistinct AggFunc = "count_distinct"
	Sum           AggFunc = "sum"
	Min           AggFunc = "min"
	Max           AggFunc = "max"
	Avg           AggFunc = "avg"
)

// AggCall is one aggregate: Fn over input column Arg (-1: count(*)),
// counting only rows where input column Filter is true (-1: all rows;
// SQL's FILTER (WHERE …), computed upstream into a column). Type is the
// result's type.
type AggCall struct {
	Fn     AggFunc `json:"fn"`
	Arg    int     `json:"arg"`
	Filter int     `json:"filter"`
	Type   Type    `json:"t"`
}

// OutputItem is one output column of a window aggregate: an input group
// column, window_start, window_end, or an aggregate's result.
type OutputItem struct {
	// Kind is "group" (input column Index), "window_start",
	// "window_end" or "agg" (AggCall Index).
	Kind  string `json:"kind"`
	Index int    `json:"i,omitempty"`
}

// WindowAgg aggregates its input rows per key and window and emits one
// row per key and window when the watermark (or the clock) passes the
// window's end, stamped at its last millisecond. The key is the record
// key the upstream vertex wrote (the group columns), so rows of a group
// meet on one subtask; Group names those input columns.
type WindowAgg struct {
	In     Schema       `json:"in"`
	Window Window       `json:"window"`
	Group  []int        `json:"group,omitempty"`
	Aggs   []AggCall    `json:"aggs"`
	Output []OutputItem `json:"output"`
	Out    Schema       `json:"outSchema"`
	Enc    Encoding     `json:"enc"`
	// Partial: the input is a local aggregate's partial accumulators
	// (the record value), which this, the global phase, merges.
	Partial bool `json:"partial,omitempty"`
}

// JoinKind is how a join pairs its inputs' rows in time.
type JoinKind string

const (
	// IntervalJoin pairs a left row l with the right rows r of its key
	// with l.ts + Lower <= r.ts <= l.ts + Upper (record timestamps).
	IntervalJoin JoinKind = "interval"
	// WindowJoin pairs the rows of a key that fall in the same tumbling
	// window of Size (both inputs are window aggregates' results, or
	// windowed rows, of the same windows), when the window fires.
	WindowJoin JoinKind = "window"
	// RegularJoin pairs every row of a key with every row of the other
	// input seen so far, and takes back the pairs of a row its input
	// retracts: its state is every row of both inputs, unbounded but for
	// a TTL. The only kind an outer join, or a join of results that
	// update, can be.
	RegularJoin JoinKind = "regular"
)

// Join is an inner equi-join of two inputs (input 0 left, input 1
// right), each keyed upstream by its equality columns. The pair's row is
// the left row's columns then the right row's; Filter (over the pair,
// optional) is the rest of the join condition, and Project computes the
// output from the pair.
type Join struct {
	Kind    JoinKind `json:"kind"`
	Left    Schema   `json:"left"`
	Right   Schema   `json:"right"`
	Lower   int64    `json:"lower,omitempty"`
	Upper   int64    `json:"upper,omitempty"`
	Size    int64    `json:"size,omitempty"`
	Filter  *Expr    `json:"filter,omitempty"`
	Project []Expr   `json:"project"`
	Out     Schema   `json:"outSchema"`
	Enc     Encoding `json:"enc"`
	// TTL, in milliseconds of processing time, drops a regular join's
	// rows of a key when the key saw no row for that long (0: kept
	// forever).
	TTL int64 `json:"ttl,omitempty"`
	// Type is a regular join's: inner (empty), or an outer join, whose
	// rows without a match pair with NULLs.
	Type JoinType `json:"type,omitempty"`
	// LeftChangelog and RightChangelog: that input of a regular join is a
	// retract stream (its records carry row kinds).
	LeftChangelog  bool `json:"leftChangelog,omitempty"`
	RightChangelog bool `json:"rightChangelog,omitempty"`
}

// JoinType is which rows without a match a regular join keeps.
type JoinType string

const (
	InnerJoin JoinType = ""
	LeftJoin  JoinType = "left"
	RightJoin JoinType = "right"
	FullJoin  JoinType = "full"
)

// GroupAgg is an unbounded GROUP BY (Flink's GroupAggregate): it keeps
// an accumulator per group and emits every change of a group's result as
// a changelog (+I for a new group, -U/+U for a changed one, -D when its
// last row is retracted). Its input is keyed by the group columns
// upstream. Out is the group columns, then the aggregates.
type GroupAgg struct {
	In Schema `json:"in"`
	// InChangelog: the input is a retract stream, whose -U and -D rows
	// the aggregates take back; else it is append-only.
	InChangelog bool      `json:"inChangelog,omitempty"`
	Group       []int     `json:"group,omitempty"`
	Aggs        []AggCall `json:"aggs"`
	Out         Schema    `json:"outSchema"`
	Enc         Encoding  `json:"enc"`
	// TTL, in milliseconds of processing time, drops a group's state
	// when no row touched it for that long (0: kept forever).
	TTL       int64     `json:"ttl,omitempty"`
	MiniBatch MiniBatch `json:"miniBatch,omitempty"`
}

// Normalize turns an upsert stream into a retract stream (Flink's
// ChangelogNormalize): it keeps the latest row of each key (its input is
// keyed by Key upstream) and emits +I for a new key, -U/+U when the row
// changes (nothing when it does not), -D with the whole row for a
// deletion of a key it has.
type Normalize struct {
	In  Schema   `json:"in"`
	Key []int    `json:"key"`
	Enc Encoding `json:"enc"`
	TTL int64    `json:"ttl,omitempty"`
}

// MiniBatch folds the changes of a group within a batch into one (Flink's
// mini-batch aggregation): a group updated a hundred times between two
// flushes emits one -U/+U pair. A batch ends when it holds Size groups,
// Latency milliseconds after its first change, before every checkpoint
// barrier and at the end of the input. Size 0: off, every change is
// emitted as it happens.
type MiniBatch struct {
	Size    int   `json:"size,omitempty"`
	Latency int64 `json:"latency,omitempty"`
}

// SortKey is one ORDER BY item of a TopN.
type SortKey struct {
	Col        int  `json:"c"`
	Desc       bool `json:"desc,omitempty"`
	NullsFirst bool `json:"nullsFirst,omitempty"`
}

// TopN keeps the first Limit rows of each partition in Order (ROW_NUMBER()
// OVER (PARTITION BY … ORDER BY …) with WHERE rn <= Limit; Limit 1 is a
// deduplication) and emits the changes of that set as a changelog. Rows
// equal in Order rank in arrival order (ROW_NUMBER's ties are
// arbitrary). The input is keyed by the partition columns upstream. Out
// is the input's columns, then, when Rank, the row number (BIGINT).
type TopN struct {
	In          Schema    `json:"in"`
	InChangelog bool      `json:"inChangelog,omitempty"`
	Partition   []int     `json:"partition,omitempty"`
	Order       []SortKey `json:"order"`
	Limit       int64     `json:"limit"`
	Rank        bool      `json:"rank,omitempty"`
	Out         Schema    `json:"outSchema"`
	Enc         Encoding  `json:"enc"`
	TTL         int64     `json:"ttl,omitempty"`
}

// OverAgg computes aggregates over a frame of rows around each row of
// its partition (aggregate() OVER (PARTITION BY … ORDER BY … ROWS
// BETWEEN …)): the frame of the row at position i of its partition, in
// Order, is the rows at i+Lo … i+Hi. Rows equal in Order are ordered by
// their values, so that the result does not depend on arrival order. A
// row added or taken back changes the results of the rows whose frames
// it enters or leaves, which are emitted as updates: the output is a
// changelog. The input is keyed by the partition columns upstream. Out
// is the input's columns, then the aggregates.
type OverAgg struct {
	In          Schema    `json:"in"`
	InChangelog bool      `json:"inChangelog,omitempty"`
	Partition   []int     `json:"partition,omitempty"`
	Order       []SortKey `json:"order"`
	Lo          int64     `json:"lo"`
	Hi          int64     `json:"hi"`
	Aggs        []AggCall `json:"aggs"`
	Out         Schema    `json:"outSchema"`
	Enc         Encoding  `json:"enc"`
	TTL         int64     `json:"ttl,omitempty"`
}

// Blackhole discards rows, counting them (connector 'blackhole').
type Blackhole struct{}

// Collect sends rows to a client that streams a query's result (a SELECT
// with no sink, run from `weir sql`): Address is where the client listens.
type Collect struct {
	In      Schema `json:"in"`
	Address string `json:"address"`
}

// Marshal encodes op for a vertex configuration.
func Marshal(op *Operator) (string, error) {
	b, err := json.Marshal(op)
	return string(b), err
}

// Unmarshal decodes a vertex configuration's plan.
func Unmarshal(s string) (*Operator, error) {
	var op Operator
	if err := json.Unmarshal([]byte(s), &op); err != nil {
		return nil, fmt.Errorf("sql plan: %w", err)
	}
	return &op, nil
}
