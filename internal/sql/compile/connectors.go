package compile

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirproject/weir/internal/connector"
	_ "github.com/weirproject/weir/internal/connector/builtin" // the connectors' documented keys
	"github.com/weirproject/weir/internal/sql/plan"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Connectors in SQL are the job spec's, through the connector registry:
// an option key is the spec key with '_' for '-' (SQL names cannot have
// hyphens) and '.' for nesting (event_time.step is event-time: {step}),
// and a value is a string, typed here by the key's documented type. A
// few options are SQL's own (connector, format) or RisingWave's names for
// the Nexmark generator's settings.

// connectorOps is which operator a connector runs as a source or a sink.
var connectorOps = map[string][2]string{
	"nexmark":   {"nexmark-source", ""},
	"sequence":  {"sequence-source", ""},
	"kafka":     {"kafka-source", "kafka-sink"},
	"file":      {"", "file-sink"},
	"blackhole": {"", "blackhole"},
}

func connectorNames() []string {
	var ns []string
	for n := range connectorOps {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// nexmarkTables are the columns of RisingWave's nexmark connector's
// tables, which the Nexmark decoding fills by name.
var nexmarkTables = map[string]plan.Format{"bid": plan.FormatNexmarkBid, "auction": plan.FormatNexmarkAuction, "person": plan.FormatNexmarkPerson}

// sqlOnly are options every connector takes that are not spec keys.
var sqlOnly = map[string]bool{"connector": true, "type": true, "force_append_only": true, "format": true}

// connectorConfig turns a statement's options into an operator config
// for operator op, refusing what the registry does not document. sink
// says which side.
func (s *script) connectorConfig(what string, opts map[string]option, off int, op string, skip map[string]bool) (map[string]any, error) {
	spec, ok := connector.Lookup(op)
	if !ok {
		return nil, s.errAt(off, "%s: operator %s is not registered", what, op)
	}
	keys := map[string]connector.Key{}
	for _, k := range spec.Keys {
		keys[k.Name] = k
	}
	cfg := map[string]any{}
	var known []string
	for _, k := range spec.Keys {
		known = append(known, strings.ReplaceAll(k.Name, "-", "_"))
	}
	for _, name := range sortedKeys(opts) {
		o := opts[name]
		if sqlOnly[name] || skip[name] {
			continue
		}
		path := strings.Split(strings.ReplaceAll(name, "_", "-"), ".")
		k, ok := keys[path[0]]
		if !ok {
			return nil, s.errAt(o.off, "%s: unknown option %s for connector %s%s", what, name, opts["connector"].value, didYouMean(name, known))
		}
		m := cfg
		for _, p := range path[:len(path)-1] {
			sub, _ := m[p].(map[string]any)
			if sub == nil {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		m[path[len(path)-1]] = typedValue(k.Type, o.value)
	}
	for _, k := range spec.Keys {
		if k.Required && cfg[k.Name] == nil && !skip["-"+k.Name] {
			return nil, s.errAt(off, "%s: connector %s needs option %s", what, opts["connector"].value, strings.ReplaceAll(k.Name, "-", "_"))
		}
	}
	return cfg, nil
}

func sortedKeys(m map[string]option) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// typedValue types a string option by its key's documented type: numbers
// as numbers, lists as lists, the rest as strings (durations included).
func typedValue(typ, v string) any {
	switch {
	case strings.HasPrefix(typ, "list"):
		var out []any
		for _, p := range strings.Split(v, ",") {
			out = append(out, strings.TrimSpace(p))
		}
		return out
	case typ == "bool" || typ == "boolean":
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && !strings.Contains(typ, "duration") {
		return float64(n)
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && !strings.Contains(typ, "duration") {
		return f
	}
	return v
}

// source adds (once per job) the vertex reading a source and says how
// its records decode into rows.
func (b *builder) source(src *source) (string, plan.Decoding, error) {
	dec := plan.Decoding{Schema: src.cols, Timestamp: -1}
	switch src.options["connector"].value {
	case "nexmark":
		dec.Format = nexmarkTables[strings.ToLower(src.options["nexmark.table.type"].value)]
	case "sequence":
		dec.Format = plan.FormatSequence
	case "kafka":
		dec.Format = plan.FormatJSON
		if src.encode == "CSV" {
			dec.Format = plan.FormatCSV
		}
		dec.Timestamp = src.rowtime
		if src.proctime >= 0 {
			dec.Clock = []int{src.proctime}
		}
	}
	if name, ok := b.sources[src]; ok {
		return name, dec, nil
	}
	name := b.unique("source-" + src.name)
	b.sources[src] = name
	cfg, _ := structpb.NewStruct(src.config)
	v := &weirv1.JobVertex{Name: name, Operator: src.operator, Parallelism: b.par, Config: cfg}
	if src.rowtime >= 0 {
		v.Watermarks = &weirv1.WatermarkStrategy{MaxOutOfOrderness: durationpb.New(time.Duration(src.delay) * time.Millisecond)}
		if src.idle > 0 {
			v.Watermarks.IdleTimeout = durationpb.New(src.idle)
		}
		if src.wmInterval > 0 {
			v.Watermarks.Interval = durationpb.New(src.wmInterval)
		}
	}
	v.Description = "Source " + src.name + " (connector " + src.options["connector"].value + ")"
	b.g.Vertices = append(b.g.Vertices, v)
	b.ops[name] = nil
	return name, dec, nil
}

// checkSource reads a source's connector options into its operator and
// configuration, refusing unknown connectors and options.
func (s *script) checkSource(src *source) error {
	c, ok := src.options["connector"]
	if !ok {
		return s.errAt(src.off, "source %s: WITH (connector = '…') is missing (one of %s)", src.name, strings.Join(connectorNames(), ", "))
	}
	ops, ok := connectorOps[c.value]
	if !ok {
		return s.errAt(c.off, "source %s: unknown connector %q%s", src.name, c.value, didYouMean(c.value, connectorNames()))
	}
	if ops[0] == "" {
		return s.errAt(c.off, "source %s: connector %s writes only (a sink), it cannot be read", src.name, c.value)
	}
	src.operator = ops[0]
	skip := map[string]bool{}
	// The watermark strategy's other settings, for any source.
	for k, yk := range map[string]*time.Duration{"watermark.idle_timeout": &src.idle, "watermark.interval": &src.wmInterval} {
		o, ok := src.options[k]
		if !ok {
			continue
		}
		d, err := time.ParseDuration(o.value)
		if err != nil || d < 0 {
			return s.errAt(o.off, "source %s: %s wants a duration such as '30s', got %q", src.name, k, o.value)
		}
		if src.rowtime < 0 {
			return s.errAt(o.off, "source %s: %s without a WATERMARK", src.name, k)
		}
		*yk = d
		skip[k] = true
	}
	switch c.value {
	case "nexmark":
		cfg, err := s.nexmarkConfig(src)
		if err != nil {
			return err
		}
		src.config = cfg
		return nil
	case "sequence":
		want := plan.Schema{{Name: "k", Type: plan.Type{Kind: plan.Int64}}, {Name: "v", Type: plan.Type{Kind: plan.Int64}}, {Name: "ts", Type: plan.Type{Kind: plan.Timestamp}}}
		for _, col := range src.cols {
			found := false
			for _, w := range want {
				if col.Name == w.Name && col.Type == w.Type {
					found = true
				}
			}
			if !found && src.proctime < 0 || !found && src.cols[src.proctime].Name != col.Name {
				return s.errAt(src.off, "source %s: the sequence connector's columns are k BIGINT, v BIGINT, ts TIMESTAMP (a subset, any order); %s %s is not one", src.name, col.Name, col.Type)
			}
		}
	case "kafka":
		if f, ok := src.options["format"]; ok && src.encode == "" {
			// Flink's CREATE TABLE … WITH ('format' = 'json').
			src.encode = strings.ToUpper(f.value)
		}
		switch src.encode {
		case "", "JSON", "CSV":
		default:
			return s.errAt(src.off, "source %s: ENCODE %s is not supported (JSON or CSV)", src.name, src.encode)
		}
		if src.encode == "" {
			src.encode = "JSON"
		}
		if v, ok := src.options["properties.bootstrap.server"]; ok {
			src.options["bootstrap_servers"] = option{key: "bootstrap_servers", value: v.value, off: v.off}
			skip["properties.bootstrap.server"] = true
		}
		if v, ok := src.options["scan.startup.mode"]; ok {
			src.options["starting_offsets"] = option{key: "starting_offsets", value: v.value, off: v.off}
			skip["scan.startup.mode"] = true
		}
	}
	cfg, err := s.connectorConfig("source "+src.name, src.options, src.off, src.operator, skip)
	if err != nil {
		return err
	}
	src.config = cfg
	return nil
}

// nexmarkConfig maps RisingWave's nexmark connector options onto the
// nexmark-source's.
func (s *script) nexmarkConfig(src *source) (map[string]any, error) {
	tt, ok := src.options["nexmark.table.type"]
	if !ok {
		return nil, s.errAt(src.off, "source %s: the nexmark connector needs nexmark.table.type = 'Bid', 'Auction' or 'Person'", src.name)
	}
	kind := strings.ToLower(tt.value)
	if _, ok := nexmarkTables[kind]; !ok {
		return nil, s.errAt(tt.off, "source %s: nexmark.table.type %q: want Bid, Auction or Person", src.name, tt.value)
	}
	cfg := map[string]any{"kinds": []any{kind}}
	skip := map[string]bool{"nexmark.table.type": true, "watermark.idle_timeout": true, "watermark.interval": true}
	ints := map[string]string{"nexmark.split.num": "splits", "nexmark.event.num": "events"}
	for k, yk := range ints {
		if o, ok := src.options[k]; ok {
			n, err := strconv.ParseInt(o.value, 10, 64)
			if err != nil || n < 0 {
				return nil, s.errAt(o.off, "source %s: %s wants a whole number, got %q", src.name, k, o.value)
			}
			if n > 0 || k == "nexmark.event.num" {
				cfg[yk] = float64(n)
			}
			skip[k] = true
		}
	}
	if o, ok := src.options["nexmark.min.event.gap.in.ns"]; ok {
		n, err := strconv.ParseInt(o.value, 10, 64)
		if err != nil || n < 0 {
			return nil, s.errAt(o.off, "source %s: nexmark.min.event.gap.in.ns wants a whole number, got %q", src.name, o.value)
		}
		if n > 0 {
			cfg["rate"] = 1e9 / float64(n)
		}
		skip["nexmark.min.event.gap.in.ns"] = true
	}
	// RisingWave's batching knob: the runtime batches by itself.
	skip["nexmark.max.chunk.size"] = true
	// The rest are the generator's settings under RisingWave's names,
	// nexmark.<words> for the spec's <words joined by hyphens>.
	opts := map[string]option{"connector": src.options["connector"]}
	for k, o := range src.options {
		if skip[k] || sqlOnly[k] {
			continue
		}
		name, ok := strings.CutPrefix(k, "nexmark.")
		if !ok {
			return nil, s.errAt(o.off, "source %s: unknown option %s for connector nexmark (its options are nexmark.*)", src.name, k)
		}
		name = strings.ReplaceAll(name, ".", "_")
		if name == "base_time" {
			// RisingWave's base time is Unix milliseconds.
			if ms, err := strconv.ParseInt(o.value, 10, 64); err == nil {
				o.value = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
			}
		}
		if name == "kinds" || name == "format" || name == "key" {
			return nil, s.errAt(o.off, "source %s: option %s is set by nexmark.table.type", src.name, k)
		}
		opts[name] = option{key: name, value: o.value, off: o.off}
	}
	rest, err := s.connectorConfig("source "+src.name, opts, src.off, "nexmark-source", nil)
	if err != nil {
		return nil, err
	}
	for k, v := range rest {
		cfg[k] = v
	}
	return cfg, nil
}

// sinkTarget is what a sink is given: the query's relation and the
// sink's declaration.
type sinkTarget struct {
	name string
	opts map[string]option
	off  int
	// format and encode are FORMAT x ENCODE y.
	format, encode string
	// pk is a declared primary key (PRIMARY KEY … NOT ENFORCED of the
	// table INSERT INTO writes), nil if none.
	pk    []string
	pkOff int
	// r is the query's relation: its changelog mode and unique key.
	r *rel
}

// sinkVertex adds the vertex writing a sink's rows and sets the format
// the stage before it encodes them in.
func (s *script) sinkVertex(b *builder, st *stage, t sinkTarget) error {
	name, opts, off := t.name, t.opts, t.off
	c, ok := opts["connector"]
	if !ok {
		return s.errAt(off, "sink %s: WITH (connector = '…') is missing (blackhole, file or kafka)", name)
	}
	ops, ok := connectorOps[c.value]
	if !ok {
		return s.errAt(c.off, "sink %s: unknown connector %q%s", name, c.value, didYouMean(c.value, connectorNames()))
	}
	if ops[1] == "" {
		return s.errAt(c.off, "sink %s: connector %s is a source, it cannot be written", name, c.value)
	}
	skip := map[string]bool{}
	// The record key is the primary key's, set below, or none.
	st.enc.Format, st.enc.Changelog, st.enc.Key = plan.FormatCSV, false, nil
	if f, ok := opts["format"]; ok {
		switch strings.ToLower(f.value) {
		case "csv":
		case "json":
			st.enc.Format = plan.FormatJSON
		case "debezium-json":
			// Flink's name for the Debezium changelog format.
			st.enc.Format = plan.FormatJSON
			if _, ok := opts["type"]; !ok {
				opts["type"] = option{key: "type", value: "debezium", off: f.off}
			}
		default:
			return s.errAt(f.off, "sink %s: format %q: want 'csv', 'json' or 'debezium-json'", name, f.value)
		}
	}
	switch t.encode {
	case "":
	case "JSON":
		st.enc.Format = plan.FormatJSON
	case "CSV":
		st.enc.Format = plan.FormatCSV
	default:
		return s.errAt(off, "sink %s: ENCODE %s is not supported (JSON or CSV)", name, t.encode)
	}
	// How the rows are written: RisingWave's type = '…' (or its FORMAT
	// PLAIN|UPSERT|DEBEZIUM), append-only by default.
	typ, typOff := "append-only", off
	if o, ok := opts["type"]; ok {
		typ, typOff = strings.ToLower(o.value), o.off
	}
	switch t.format {
	case "":
	case "PLAIN":
		typ = "append-only"
	case "UPSERT":
		typ = "upsert"
	case "DEBEZIUM":
		typ = "debezium"
	default:
		return s.errAt(off, "sink %s: FORMAT %s is not supported (PLAIN, UPSERT or DEBEZIUM)", name, t.format)
	}
	force := false
	if o, ok := opts["force_append_only"]; ok {
		v, err := strconv.ParseBool(o.value)
		if err != nil {
			return s.errAt(o.off, "sink %s: force_append_only wants true or false", name)
		}
		force = v
	}
	var pk []int
	pkNames := t.pk
	pkOff := t.pkOff
	if k, ok := opts["primary_key"]; ok {
		skip["primary_key"] = true
		pkNames, pkOff = nil, k.off
		for _, n := range strings.Split(k.value, ",") {
			pkNames = append(pkNames, strings.TrimSpace(n))
		}
	}
	for _, n := range pkNames {
		i := indexOf(st.schema, n)
		if i < 0 {
			return s.errAt(pkOff, "sink %s: primary key column %q is not in the query's columns%s", name, n, didYouMean(n, names(st.schema)))
		}
		pk = append(pk, i)
	}
	updating := t.r.updating()
	if c.value == "blackhole" {
		// Its rows are discarded: any type will do, and no key; and no
		// text to write them in (as Flink's blackhole, which takes its
		// rows without serializing them), the runtime's binary encoding.
		typ, pk = "append-only", nil
		force = true
		st.enc.Format = plan.FormatRow
	}
	switch typ {
	case "append-only":
		switch {
		case updating && force:
			st.enc.Sink = plan.SinkForceAppend
		case updating:
			return s.errAt(typOff, "sink %s: the query's results update (%s), which an append-only sink cannot take: write type = 'upsert' (with a primary key), type = 'debezium' (a changelog), or force_append_only = 'true' (keep only the rows added)", name, t.r.why)
		}
	case "upsert":
		if c.value == "file" {
			return s.errAt(typOff, "sink %s: a file cannot be updated in place: write type = 'debezium', a changelog of every change", name)
		}
		if pk == nil {
			if t.r.ukey == nil {
				return s.errAt(typOff, "sink %s: an upsert sink needs a primary key, and the query's rows have none the planner can derive: give primary_key = 'col, …'", name)
			}
			pk = t.r.ukey
		} else if t.r.ukey != nil && !containsAll(pk, t.r.ukey) {
			return s.errAt(pkOff, "sink %s: the primary key (%s) does not identify the query's rows, whose unique key is (%s): rows of one key would overwrite each other", name, strings.Join(pkNames, ", "), strings.Join(colNames(st.schema, t.r.ukey), ", "))
		}
		if len(pk) == 0 {
			return s.errAt(typOff, "sink %s: the query has one row, with no column to key it by: an upsert sink needs a primary key column", name)
		}
		st.enc.Sink = plan.SinkUpsert
	case "debezium":
		st.enc.Sink, st.enc.Format = plan.SinkDebezium, plan.FormatJSON
		if pk == nil && t.r.ukey != nil && len(t.r.ukey) > 0 {
			pk = t.r.ukey
		}
	default:
		return s.errAt(typOff, "sink %s: type %q: want 'append-only', 'upsert' or 'debezium'", name, typ)
	}
	if !updating && st.enc.Sink == plan.SinkForceAppend {
		st.enc.Sink = ""
	}
	if pk != nil && c.value == "kafka" {
		// The message key: the primary key's columns, in the value's
		// encoding (a tombstone is the key alone).
		st.enc.Key, st.enc.KeyFormat = pk, st.enc.Format
	}
	cfg := map[string]any{}
	switch c.value {
	case "blackhole":
		for k, o := range opts {
			if !sqlOnly[k] {
				return s.errAt(o.off, "sink %s: unknown option %s for connector blackhole", name, k)
			}
		}
	case "file", "kafka":
		if c.value == "kafka" {
			if v, ok := opts["properties.bootstrap.server"]; ok {
				opts["bootstrap_servers"] = option{key: "bootstrap_servers", value: v.value, off: v.off}
				skip["properties.bootstrap.server"] = true
			}
		}
		var err error
		if cfg, err = s.connectorConfig("sink "+name, opts, off, ops[1], skip); err != nil {
			return err
		}
		if c.value == "file" {
			cfg["line"] = "value"
		}
		if c.value == "kafka" && st.enc.Sink == plan.SinkUpsert {
			cfg["tombstones"] = true
		}
	}
	cs, err := structpb.NewStruct(cfg)
	if err != nil {
		return s.errAt(off, "sink %s: %v", name, err)
	}
	v := &weirv1.JobVertex{Name: b.unique("sink-" + name), Operator: ops[1], Parallelism: b.par, Config: cs,
		Inputs:      []*weirv1.JobEdge{{Source: st.vertex, Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD}},
		Description: fmt.Sprintf("Sink %s (connector %s, %s)", name, c.value, sinkFormat(st.enc))}
	b.g.Vertices = append(b.g.Vertices, v)
	return nil
}

// sinkFormat says how a sink's records are written.
func sinkFormat(e *plan.Encoding) string {
	f := string(e.Format)
	switch e.Sink {
	case plan.SinkUpsert:
		f = "upsert " + f
	case plan.SinkDebezium:
		f = "Debezium JSON"
	case plan.SinkForceAppend:
		f += ", the added rows only"
	}
	return f
}

func containsAll(set, sub []int) bool {
	for _, x := range sub {
		found := false
		for _, y := range set {
			found = found || x == y
		}
		if !found {
			return false
		}
	}
	return true
}

func colNames(s plan.Schema, idx []int) []string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = s[j].Name
	}
	return out
}

func indexOf(s plan.Schema, name string) int {
	for i, c := range s {
		if c.Name == name {
			return i
		}
	}
	return -1
}

var errNoStatements = errors.New("the script has no statements")
