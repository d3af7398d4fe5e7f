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

// sinkVertex adds the vertex writing a sink's rows and sets the format
// the stage before it encodes them in.
func (s *script) sinkVertex(b *builder, st *stage, name string, opts map[string]option, off int) error {
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
	if t, ok := opts["type"]; ok && t.value != "append-only" {
		return s.errAt(t.off, "sink %s: type %q is not supported yet: this query's results are append-only (type = 'append-only'); upsert sinks need changelog streams", name, t.value)
	}
	skip := map[string]bool{}
	st.enc.Format = plan.FormatCSV
	if f, ok := opts["format"]; ok {
		switch strings.ToLower(f.value) {
		case "csv":
		case "json":
			st.enc.Format = plan.FormatJSON
		default:
			return s.errAt(f.off, "sink %s: format %q: want 'csv' or 'json'", name, f.value)
		}
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
			if k, ok := opts["primary_key"]; ok {
				skip["primary_key"] = true
				var keys []int
				for _, n := range strings.Split(k.value, ",") {
					i := indexOf(st.schema, strings.TrimSpace(n))
					if i < 0 {
						return s.errAt(k.off, "sink %s: primary_key column %q is not in the query's columns%s", name, strings.TrimSpace(n), didYouMean(n, names(st.schema)))
					}
					keys = append(keys, i)
				}
				st.enc.Key, st.enc.KeyFormat = keys, st.enc.Format
			}
		}
		var err error
		if cfg, err = s.connectorConfig("sink "+name, opts, off, ops[1], skip); err != nil {
			return err
		}
		if c.value == "file" {
			cfg["line"] = "value"
		}
	}
	cs, err := structpb.NewStruct(cfg)
	if err != nil {
		return s.errAt(off, "sink %s: %v", name, err)
	}
	v := &weirv1.JobVertex{Name: b.unique("sink-" + name), Operator: ops[1], Parallelism: b.par, Config: cs,
		Inputs:      []*weirv1.JobEdge{{Source: st.vertex, Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD}},
		Description: fmt.Sprintf("Sink %s (connector %s, %s)", name, c.value, st.enc.Format)}
	b.g.Vertices = append(b.g.Vertices, v)
	return nil
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
