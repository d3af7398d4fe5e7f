package jobgraph

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// The *Doc types mirror the YAML spec. Leaves are yaml.Node so that the
// strict decode (KnownFields) only checks the shape and every value is
// converted here, where its path and line are known for the error message.
type specDoc struct {
	Name            yaml.Node         `yaml:"name"`
	MaxParallelism  yaml.Node         `yaml:"max-parallelism"`
	RestoreFrom     yaml.Node         `yaml:"restore-from"`
	Checkpointing   *checkpointingDoc `yaml:"checkpointing"`
	RestartStrategy *restartDoc       `yaml:"restart-strategy"`
	State           *stateDoc         `yaml:"state"`
	Vertices        []vertexDoc       `yaml:"vertices"`
}

type checkpointingDoc struct {
	Interval                   yaml.Node `yaml:"interval"`
	Mode                       yaml.Node `yaml:"mode"`
	Timeout                    yaml.Node `yaml:"timeout"`
	MinPause                   yaml.Node `yaml:"min-pause"`
	MaxConcurrent              yaml.Node `yaml:"max-concurrent"`
	Retained                   yaml.Node `yaml:"retained"`
	Unaligned                  yaml.Node `yaml:"unaligned"`
	AlignedCheckpointTimeout   yaml.Node `yaml:"aligned-checkpoint-timeout"`
	TolerableFailedCheckpoints yaml.Node `yaml:"tolerable-failed-checkpoints"`
	Externalized               yaml.Node `yaml:"externalized"`
}

type restartDoc struct {
	Type                  yaml.Node `yaml:"type"`
	Attempts              yaml.Node `yaml:"attempts"`
	Delay                 yaml.Node `yaml:"delay"`
	InitialBackoff        yaml.Node `yaml:"initial-backoff"`
	MaxBackoff            yaml.Node `yaml:"max-backoff"`
	Multiplier            yaml.Node `yaml:"multiplier"`
	ResetBackoffThreshold yaml.Node `yaml:"reset-backoff-threshold"`
}

type stateDoc struct {
	Backend     yaml.Node `yaml:"backend"`
	Incremental yaml.Node `yaml:"incremental"`
}

type vertexDoc struct {
	Name        yaml.Node  `yaml:"name"`
	Operator    yaml.Node  `yaml:"operator"`
	Parallelism yaml.Node  `yaml:"parallelism"`
	SlotSharing yaml.Node  `yaml:"slot-sharing-group"`
	Config      yaml.Node  `yaml:"config"`
	Inputs      []inputDoc `yaml:"inputs"`
	// Watermarks is a source's watermark strategy.
	Watermarks *watermarksDoc `yaml:"watermarks"`
}

type inputDoc struct {
	From      yaml.Node `yaml:"from"`
	Partition yaml.Node `yaml:"partition"`
	// Output names the upstream's side output to read; its main output
	// when absent.
	Output yaml.Node `yaml:"output"`
}

type watermarksDoc struct {
	MaxOutOfOrderness yaml.Node `yaml:"max-out-of-orderness"`
	IdleTimeout       yaml.Node `yaml:"idle-timeout"`
	Interval          yaml.Node `yaml:"interval"`
}

// ParseSpecFile reads and parses the job spec at path; see ParseSpec.
func ParseSpecFile(path string) (*weirv1.JobGraph, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("jobgraph: read job spec: %w", err)
	}
	g, err := ParseSpec(data)
	if se, ok := errors.AsType[*SpecError](err); ok {
		se.File = path
	}
	return g, err
}

// ParseSpec parses a YAML job spec, fills in the defaults for absent keys and
// validates the result. Every error wraps ErrInvalidSpec and is a *SpecError
// listing each problem with its field path and line.
func ParseSpec(data []byte) (*weirv1.JobGraph, error) {
	root, ps := parseDocument(data)
	if len(ps) > 0 {
		return nil, ps.err()
	}
	idx := indexNodes(root)

	var doc specDoc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, translateDecodeError(err, idx).err()
	}

	c := &converter{}
	g := c.graph(&doc)
	if len(c.ps) > 0 {
		idx.fillLines(c.ps)
		return nil, c.ps.err()
	}
	if err := Validate(g); err != nil {
		if se, ok := errors.AsType[*SpecError](err); ok {
			idx.fillLines(se.Problems)
		}
		return nil, err
	}
	return g, nil
}

// parseDocument checks the YAML syntax and that there is exactly one
// document whose top level is a mapping.
func parseDocument(data []byte) (*yaml.Node, problems) {
	var ps problems
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			ps.add("", "empty job spec")
			return nil, ps
		}
		return nil, syntaxProblem(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxProblem(err)
	default:
		ps.addAt(extra.Line, "", "a job spec is a single YAML document, found a second one")
		return nil, ps
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		ps.add("", "empty job spec")
		return nil, ps
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		ps.addAt(root.Line, "", "a job spec must be a mapping of keys (name, vertices, ...), got %s", describeNode(root))
		return nil, ps
	}
	return root, nil
}

var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func syntaxProblem(err error) problems {
	var ps problems
	if m := syntaxLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		ps.addAt(line, "", "invalid YAML: %s", m[2])
		return ps
	}
	ps.add("", "invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	return ps
}

var (
	unknownFieldRe = regexp.MustCompile(`^line (\d+): field (.+) not found in type (\S+)$`)
	duplicateKeyRe = regexp.MustCompile(`^line (\d+): mapping key "(.*)" already defined at line (\d+)$`)
	wrongTypeRe    = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
)

// translateDecodeError rewrites yaml.v3's messages, which name Go types, in
// terms of spec paths.
func translateDecodeError(err error, idx *nodeIndex) problems {
	var ps problems
	te, ok := errors.AsType[*yaml.TypeError](err)
	if !ok {
		return syntaxProblem(err)
	}
	for _, msg := range te.Errors {
		if m := unknownFieldRe.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			key := m[2]
			path := key
			if e := idx.findKey(line, key); e != nil {
				path = e.path
			}
			ps.addAt(line, path, "unknown field%s", suggestField(key, m[3]))
			continue
		}
		if m := duplicateKeyRe.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			path := m[2]
			if e := idx.findKey(line, m[2]); e != nil {
				path = e.path
			}
			ps.addAt(line, path, "duplicate key, first defined at line %s", m[3])
			continue
		}
		if m := wrongTypeRe.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			var path string
			var got string
			if e := idx.findValue(line, m[2], m[3]); e != nil {
				path = e.path
				got = describeNode(e.value)
			} else {
				got = m[2]
			}
			ps.addAt(line, path, "must be %s, got %s", describeGoType(m[4]), got)
			continue
		}
		ps.add("", "%s", msg)
	}
	return ps
}

// docKeys maps the Go type names yaml.v3 puts in its messages to the keys
// allowed there, for "did you mean" hints.
var docKeys = func() map[string][]string {
	m := map[string][]string{}
	for _, v := range []any{specDoc{}, checkpointingDoc{}, restartDoc{}, stateDoc{}, vertexDoc{}, inputDoc{}, watermarksDoc{}} {
		t := reflect.TypeOf(v)
		var keys []string
		for f := range t.Fields() {
			keys = append(keys, strings.Split(f.Tag.Get("yaml"), ",")[0])
		}
		m[t.String()] = keys
	}
	return m
}()

func suggestField(key, goType string) string {
	keys := docKeys[goType]
	if len(keys) == 0 {
		return ""
	}
	best, bestDist := "", 3
	for _, k := range keys {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return fmt.Sprintf(" (known fields: %s)", strings.Join(keys, ", "))
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func describeGoType(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "jobgraph.") || strings.HasPrefix(t, "*jobgraph."):
		return "a mapping"
	}
	return t
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// nodeIndex remembers where each path of the document is, to put line
// numbers on errors found after the YAML is gone (in Validate).
type nodeIndex struct {
	entries []*nodeEntry
	byPath  map[string]*nodeEntry
	used    map[*nodeEntry]bool
}

type nodeEntry struct {
	path  string
	key   *yaml.Node // nil for list items
	value *yaml.Node
}

func indexNodes(root *yaml.Node) *nodeIndex {
	idx := &nodeIndex{byPath: map[string]*nodeEntry{}, used: map[*nodeEntry]bool{}}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				idx.add(&nodeEntry{path: p, key: k, value: v})
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, v := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				idx.add(&nodeEntry{path: p, value: v})
				walk(v, p)
			}
		}
	}
	walk(root, "")
	return idx
}

func (idx *nodeIndex) add(e *nodeEntry) {
	idx.entries = append(idx.entries, e)
	if _, dup := idx.byPath[e.path]; !dup {
		idx.byPath[e.path] = e
	}
}

// findKey finds the mapping key on line named key, each at most once so that
// two same-named errors on one (flow style) line get distinct paths.
func (idx *nodeIndex) findKey(line int, key string) *nodeEntry {
	for _, e := range idx.entries {
		if e.key != nil && e.key.Line == line && e.key.Value == key && !idx.used[e] {
			idx.used[e] = true
			return e
		}
	}
	return nil
}

func (idx *nodeIndex) findValue(line int, tag, value string) *nodeEntry {
	for _, e := range idx.entries {
		v := e.value
		if v.Line != line || v.ShortTag() != tag || idx.used[e] {
			continue
		}
		if v.Kind == yaml.ScalarNode && value != "" && !strings.HasPrefix(v.Value, strings.TrimSuffix(value, "...")) {
			continue
		}
		idx.used[e] = true
		return e
	}
	return nil
}

func (idx *nodeIndex) fillLines(ps []Problem) {
	for i := range ps {
		if ps[i].Line == 0 {
			ps[i].Line = idx.line(ps[i].Path)
		}
	}
}

// line finds the line of path, or of its nearest ancestor present in the
// document when path itself was filled in by a default.
func (idx *nodeIndex) line(path string) int {
	for path != "" {
		if e, ok := idx.byPath[path]; ok {
			if e.key != nil {
				return e.key.Line
			}
			return e.value.Line
		}
		cut := max(strings.LastIndexByte(path, '.'), strings.LastIndexByte(path, '['))
		if cut < 0 {
			break
		}
		path = path[:cut]
	}
	return 0
}

// converter turns the decoded document into a JobGraph, collecting a problem
// for each value of the wrong type instead of stopping at the first.
type converter struct {
	ps problems
}

func (c *converter) graph(d *specDoc) *weirv1.JobGraph {
	g := &weirv1.JobGraph{
		Name:           c.str(&d.Name, "name"),
		MaxParallelism: c.int32(&d.MaxParallelism, "max-parallelism", DefaultMaxParallelism),
		RestoreFrom:    c.str(&d.RestoreFrom, "restore-from"),
	}

	cp := d.Checkpointing
	if cp == nil {
		cp = &checkpointingDoc{}
	}
	g.Checkpointing = &weirv1.CheckpointConfig{
		Interval:                   c.duration(&cp.Interval, "checkpointing.interval", 0),
		Timeout:                    c.duration(&cp.Timeout, "checkpointing.timeout", DefaultCheckpointTimeout),
		MinPause:                   c.duration(&cp.MinPause, "checkpointing.min-pause", 0),
		MaxConcurrent:              c.int32(&cp.MaxConcurrent, "checkpointing.max-concurrent", 1),
		Mode:                       enumValue(c, &cp.Mode, "checkpointing.mode", "mode", modeNames, weirv1.CheckpointingMode_CHECKPOINTING_MODE_EXACTLY_ONCE),
		Retained:                   c.int32(&cp.Retained, "checkpointing.retained", 1),
		Unaligned:                  c.bool(&cp.Unaligned, "checkpointing.unaligned", false),
		AlignedCheckpointTimeout:   c.duration(&cp.AlignedCheckpointTimeout, "checkpointing.aligned-checkpoint-timeout", 0),
		TolerableFailedCheckpoints: c.int32(&cp.TolerableFailedCheckpoints, "checkpointing.tolerable-failed-checkpoints", 0),
		ExternalizedRetention:      enumValue(c, &cp.Externalized, "checkpointing.externalized", "retention", externalizedNames, weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_DELETE_ON_CANCELLATION),
	}

	g.RestartStrategy = c.restart(d.RestartStrategy, g.Checkpointing.GetInterval().AsDuration() > 0)

	st := d.State
	if st == nil {
		st = &stateDoc{}
	}
	g.State = &weirv1.StateBackendConfig{
		Backend:     enumValue(c, &st.Backend, "state.backend", "backend", backendNames, weirv1.StateBackendConfig_BACKEND_HEAP),
		Incremental: c.bool(&st.Incremental, "state.incremental", false),
	}

	for i := range d.Vertices {
		vd := &d.Vertices[i]
		p := fmt.Sprintf("vertices[%d]", i)
		v := &weirv1.JobVertex{
			Name:        c.str(&vd.Name, p+".name"),
			Operator:    c.str(&vd.Operator, p+".operator"),
			Parallelism: c.int32(&vd.Parallelism, p+".parallelism", 1),
			Config:      c.config(&vd.Config, p+".config"),
			// Empty is the default group, as in Flink.
			SlotSharingGroup: c.str(&vd.SlotSharing, p+".slot-sharing-group"),
		}
		if w := vd.Watermarks; w != nil {
			wp := p + ".watermarks"
			v.Watermarks = &weirv1.WatermarkStrategy{
				MaxOutOfOrderness: c.duration(&w.MaxOutOfOrderness, wp+".max-out-of-orderness", 0),
				IdleTimeout:       c.duration(&w.IdleTimeout, wp+".idle-timeout", 0),
				Interval:          c.duration(&w.Interval, wp+".interval", DefaultWatermarkInterval),
			}
		}
		for j := range vd.Inputs {
			in := &vd.Inputs[j]
			ip := fmt.Sprintf("%s.inputs[%d]", p, j)
			v.Inputs = append(v.Inputs, &weirv1.JobEdge{
				Source: c.str(&in.From, ip+".from"),
				// Left unspecified when absent, to be defaulted below once
				// every vertex's parallelism is known.
				Partitioner: enumValue(c, &in.Partition, ip+".partition", "partition", partitionNames, weirv1.Partitioner_PARTITIONER_UNSPECIFIED),
				Output:      c.str(&in.Output, ip+".output"),
			})
		}
		g.Vertices = append(g.Vertices, v)
	}
	parallelism := map[string]int32{}
	for _, v := range g.Vertices {
		if _, dup := parallelism[v.Name]; !dup {
			parallelism[v.Name] = v.Parallelism
		}
	}
	for _, v := range g.Vertices {
		for _, in := range v.Inputs {
			if p, ok := parallelism[in.Source]; ok && in.Partitioner == weirv1.Partitioner_PARTITIONER_UNSPECIFIED {
				in.Partitioner = defaultPartitioner(p, v.Parallelism)
			}
		}
	}
	return g
}

// restart reads the restart strategy. Without one, a job that checkpoints
// restarts with exponential-delay and one that does not fails for good, as
// in Flink 1.19+: a checkpointing job has a state to come back to, and one
// lost TaskManager must not end it.
func (c *converter) restart(d *restartDoc, checkpointing bool) *weirv1.RestartStrategy {
	if d == nil {
		d = &restartDoc{}
	}
	kind := enumValue(c, &d.Type, "restart-strategy.type", "type", restartNames, DefaultRestartStrategy(checkpointing))
	r := &weirv1.RestartStrategy{Kind: kind}
	typeName := restartNames.describe(kind)

	// A key the chosen type ignores is almost always a mistake (a setting
	// meant for another type), so it is rejected like an unknown key.
	notFor := func(n *yaml.Node, key, hint string) {
		if present(n) {
			c.ps.addAt(n.Line, "restart-strategy."+key, "not used by restart type %s%s", typeName, hint)
		}
	}
	switch kind {
	case weirv1.RestartStrategy_KIND_NONE:
		notFor(&d.Attempts, "attempts", "")
		notFor(&d.Delay, "delay", "")
		notFor(&d.InitialBackoff, "initial-backoff", "")
		notFor(&d.MaxBackoff, "max-backoff", "")
		notFor(&d.Multiplier, "multiplier", "")
		notFor(&d.ResetBackoffThreshold, "reset-backoff-threshold", "")
	case weirv1.RestartStrategy_KIND_FIXED_DELAY:
		r.Attempts = c.int32(&d.Attempts, "restart-strategy.attempts", DefaultFixedDelayAttempts)
		r.Delay = c.duration(&d.Delay, "restart-strategy.delay", DefaultFixedDelay)
		hint := " (it is for exponential-delay)"
		notFor(&d.InitialBackoff, "initial-backoff", hint)
		notFor(&d.MaxBackoff, "max-backoff", hint)
		notFor(&d.Multiplier, "multiplier", hint)
		notFor(&d.ResetBackoffThreshold, "reset-backoff-threshold", hint)
	case weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY:
		r.Attempts = c.int32(&d.Attempts, "restart-strategy.attempts", DefaultExponentialAttempts)
		r.InitialBackoff = c.duration(&d.InitialBackoff, "restart-strategy.initial-backoff", DefaultInitialBackoff)
		r.MaxBackoff = c.duration(&d.MaxBackoff, "restart-strategy.max-backoff", DefaultMaxBackoff)
		r.Multiplier = c.float(&d.Multiplier, "restart-strategy.multiplier", DefaultBackoffMultiplier)
		r.ResetBackoffThreshold = c.duration(&d.ResetBackoffThreshold, "restart-strategy.reset-backoff-threshold", DefaultResetBackoffThreshold)
		notFor(&d.Delay, "delay", " (exponential-delay uses initial-backoff)")
	}
	return r
}

// present treats an explicit null like an absent key, as YAML users expect
// of "key:" with nothing after it.
func present(n *yaml.Node) bool {
	n = deref(n)
	return n.Kind != 0 && !(n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// scalar returns n if it is a scalar, reporting a problem otherwise.
func (c *converter) scalar(n *yaml.Node, path, want string) (*yaml.Node, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode {
		c.ps.addAt(n.Line, path, "must be %s, got %s", want, describeNode(n))
		return nil, false
	}
	return n, true
}

func (c *converter) str(n *yaml.Node, path string) string {
	if !present(n) {
		return ""
	}
	s, ok := c.scalar(n, path, "a string")
	if !ok {
		return ""
	}
	return s.Value
}

func (c *converter) int32(n *yaml.Node, path string, def int32) int32 {
	if !present(n) {
		return def
	}
	s, ok := c.scalar(n, path, "an integer")
	if !ok {
		return def
	}
	var v int64
	if s.ShortTag() != "!!int" || s.Decode(&v) != nil {
		c.ps.addAt(s.Line, path, "must be an integer, got %q", s.Value)
		return def
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		c.ps.addAt(s.Line, path, "%d is out of range", v)
		return def
	}
	return int32(v)
}

func (c *converter) float(n *yaml.Node, path string, def float64) float64 {
	if !present(n) {
		return def
	}
	s, ok := c.scalar(n, path, "a number")
	if !ok {
		return def
	}
	var v float64
	if (s.ShortTag() != "!!float" && s.ShortTag() != "!!int") || s.Decode(&v) != nil {
		c.ps.addAt(s.Line, path, "must be a number, got %q", s.Value)
		return def
	}
	return v
}

func (c *converter) bool(n *yaml.Node, path string, def bool) bool {
	if !present(n) {
		return def
	}
	s, ok := c.scalar(n, path, "true or false")
	if !ok {
		return def
	}
	var v bool
	if s.ShortTag() != "!!bool" || s.Decode(&v) != nil {
		c.ps.addAt(s.Line, path, "must be true or false, got %q", s.Value)
		return def
	}
	return v
}

func (c *converter) duration(n *yaml.Node, path string, def time.Duration) *durationpb.Duration {
	if !present(n) {
		return durationpb.New(def)
	}
	s, ok := c.scalar(n, path, "a duration")
	if !ok {
		return durationpb.New(def)
	}
	d, err := time.ParseDuration(s.Value)
	if err != nil {
		c.ps.addAt(s.Line, path, "invalid duration %q (want a number with a unit, such as 500ms, 10s or 1m)", s.Value)
		return durationpb.New(def)
	}
	return durationpb.New(d)
}

func enumValue[T ~int32](c *converter, n *yaml.Node, path, what string, names enumNames[T], def T) T {
	if !present(n) {
		return def
	}
	s, ok := c.scalar(n, path, names.want())
	if !ok {
		return def
	}
	v, ok := names.parse(s.Value)
	if !ok {
		c.ps.addAt(s.Line, path, "unknown %s %q (want %s)", what, s.Value, names.want())
		return def
	}
	return v
}

// config converts an operator's free-form settings. google.protobuf.Struct
// holds only JSON values, so integers become float64 and are refused where
// that would change them; other scalars (dates, say) stay the text the user
// wrote, since the operator knows best what they mean.
func (c *converter) config(n *yaml.Node, path string) *structpb.Struct {
	if !present(n) {
		return nil
	}
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		c.ps.addAt(n.Line, path, "must be a mapping, got %s", describeNode(n))
		return nil
	}
	m, ok := c.jsonValue(n, path).(map[string]any)
	if !ok {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		c.ps.addAt(n.Line, path, "%v", err)
		return nil
	}
	return s
}

// maxExactInt is the largest integer a float64 holds exactly (2^53).
const maxExactInt = 1 << 53

func (c *converter) jsonValue(n *yaml.Node, path string) any {
	n = deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		lines := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := deref(n.Content[i])
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				c.ps.addAt(k.Line, path, "keys must be plain strings, got %s", describeNode(k))
				continue
			}
			kp := path + "." + k.Value
			if first, dup := lines[k.Value]; dup {
				c.ps.addAt(k.Line, kp, "duplicate key, first defined at line %d", first)
				continue
			}
			lines[k.Value] = k.Line
			out[k.Value] = c.jsonValue(n.Content[i+1], kp)
		}
		return out
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, e := range n.Content {
			out[i] = c.jsonValue(e, fmt.Sprintf("%s[%d]", path, i))
		}
		return out
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err == nil {
				return b
			}
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil || i > maxExactInt || i < -maxExactInt {
				c.ps.addAt(n.Line, path, "%s is too large: numbers are stored as float64, exact only up to 2^53", n.Value)
				return nil
			}
			return float64(i)
		case "!!float":
			var f float64
			if err := n.Decode(&f); err == nil {
				if math.IsNaN(f) || math.IsInf(f, 0) {
					c.ps.addAt(n.Line, path, "%s is not a finite number", n.Value)
					return nil
				}
				return f
			}
		}
		return n.Value
	}
	c.ps.addAt(n.Line, path, "unsupported value %s", describeNode(n))
	return nil
}
