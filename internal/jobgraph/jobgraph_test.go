package jobgraph

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

const exampleSpec = `name: running-sum
max-parallelism: 128            # optional, default 128
checkpointing: {interval: 1s, mode: exactly-once, timeout: 1m, min-pause: 0s,
                max-concurrent: 1, retained: 3, unaligned: false, aligned-checkpoint-timeout: 0s,
                tolerable-failed-checkpoints: 0, externalized: retain-on-cancellation}
restart-strategy: {type: exponential-delay, attempts: 3, initial-backoff: 1s, max-backoff: 1m,
                   multiplier: 2.0, reset-backoff-threshold: 1h}
state: {backend: pebble, incremental: true}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2,
     config: {count: 100000, keys: 16, rate: 20000}}
  - {name: sum, operator: keyed-sum, parallelism: 2, inputs: [{from: source, partition: hash}]}
  - {name: sink, operator: file-sink, parallelism: 2, inputs: [{from: sum, partition: forward}],
     config: {path: /tmp/weir-out}}
`

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseExample(t *testing.T) {
	g, err := ParseSpec([]byte(exampleSpec))
	if err != nil {
		t.Fatalf("ParseSpec: %v", err)
	}
	want := &weirv1.JobGraph{
		Name:           "running-sum",
		MaxParallelism: 128,
		Checkpointing: &weirv1.CheckpointConfig{
			Interval:                   durationpb.New(time.Second),
			Timeout:                    durationpb.New(time.Minute),
			MinPause:                   durationpb.New(0),
			MaxConcurrent:              1,
			Mode:                       weirv1.CheckpointingMode_CHECKPOINTING_MODE_EXACTLY_ONCE,
			Retained:                   3,
			AlignedCheckpointTimeout:   durationpb.New(0),
			ExternalizedRetention:      weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_RETAIN_ON_CANCELLATION,
			TolerableFailedCheckpoints: 0,
		},
		RestartStrategy: &weirv1.RestartStrategy{
			Kind:                  weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY,
			Attempts:              3,
			InitialBackoff:        durationpb.New(time.Second),
			MaxBackoff:            durationpb.New(time.Minute),
			Multiplier:            2,
			ResetBackoffThreshold: durationpb.New(time.Hour),
		},
		State: &weirv1.StateBackendConfig{Backend: weirv1.StateBackendConfig_BACKEND_PEBBLE, Incremental: true},
		Vertices: []*weirv1.JobVertex{
			{Name: "source", Operator: "sequence-source", Parallelism: 2,
				Config: mustStruct(t, map[string]any{"count": 100000.0, "keys": 16.0, "rate": 20000.0})},
			{Name: "sum", Operator: "keyed-sum", Parallelism: 2,
				Inputs: []*weirv1.JobEdge{{Source: "source", Partitioner: weirv1.Partitioner_PARTITIONER_HASH}}},
			{Name: "sink", Operator: "file-sink", Parallelism: 2,
				Inputs: []*weirv1.JobEdge{{Source: "sum", Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD}},
				Config: mustStruct(t, map[string]any{"path": "/tmp/weir-out"})},
		},
	}
	if !proto.Equal(g, want) {
		t.Errorf("ParseSpec mismatch\n got: %v\nwant: %v", g, want)
	}
}

func TestParseMinimalFillsDefaults(t *testing.T) {
	g, err := ParseSpec([]byte("name: tiny\nvertices:\n  - name: src\n    operator: sequence-source\n  - {name: out, operator: print, inputs: [{from: src}]}\n"))
	if err != nil {
		t.Fatalf("ParseSpec: %v", err)
	}
	want := &weirv1.JobGraph{
		Name:           "tiny",
		MaxParallelism: 128,
		Checkpointing: &weirv1.CheckpointConfig{
			Interval:                 durationpb.New(0),
			Timeout:                  durationpb.New(10 * time.Minute),
			MinPause:                 durationpb.New(0),
			MaxConcurrent:            1,
			Mode:                     weirv1.CheckpointingMode_CHECKPOINTING_MODE_EXACTLY_ONCE,
			Retained:                 1,
			AlignedCheckpointTimeout: durationpb.New(0),
			ExternalizedRetention:    weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_DELETE_ON_CANCELLATION,
		},
		RestartStrategy: &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_NONE},
		State:           &weirv1.StateBackendConfig{Backend: weirv1.StateBackendConfig_BACKEND_HEAP},
		Vertices: []*weirv1.JobVertex{
			{Name: "src", Operator: "sequence-source", Parallelism: 1},
			{Name: "out", Operator: "print", Parallelism: 1,
				Inputs: []*weirv1.JobEdge{{Source: "src", Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD}}},
		},
	}
	if !proto.Equal(g, want) {
		t.Errorf("defaults mismatch\n got: %v\nwant: %v", g, want)
	}
}

func TestParseDefaults(t *testing.T) {
	const vertices = "vertices:\n  - {name: a, operator: o, parallelism: 2}\n  - {name: b, operator: o, parallelism: 3, inputs: [{from: a}]}\n"
	tests := []struct {
		name  string
		spec  string
		check func(t *testing.T, g *weirv1.JobGraph)
	}{
		{"partition defaults to rebalance across parallelisms", "name: x\n" + vertices,
			func(t *testing.T, g *weirv1.JobGraph) {
				if got := g.Vertices[1].Inputs[0].Partitioner; got != weirv1.Partitioner_PARTITIONER_REBALANCE {
					t.Errorf("partitioner = %v, want REBALANCE", got)
				}
			}},
		{"fixed-delay defaults", "name: x\nrestart-strategy: {type: fixed-delay}\n" + vertices,
			func(t *testing.T, g *weirv1.JobGraph) {
				want := &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_FIXED_DELAY, Attempts: 1, Delay: durationpb.New(time.Second)}
				if !proto.Equal(g.RestartStrategy, want) {
					t.Errorf("restart = %v, want %v", g.RestartStrategy, want)
				}
			}},
		{"exponential-delay defaults", "name: x\nrestart-strategy: {type: exponential-delay}\n" + vertices,
			func(t *testing.T, g *weirv1.JobGraph) {
				want := &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY, Attempts: DefaultExponentialAttempts,
					InitialBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(time.Minute), Multiplier: 2,
					ResetBackoffThreshold: durationpb.New(time.Hour)}
				if !proto.Equal(g.RestartStrategy, want) {
					t.Errorf("restart = %v, want %v", g.RestartStrategy, want)
				}
			}},
		{"partial checkpointing block keeps other defaults", "name: x\ncheckpointing: {interval: 500ms}\n" + vertices,
			func(t *testing.T, g *weirv1.JobGraph) {
				c := g.Checkpointing
				if c.Interval.AsDuration() != 500*time.Millisecond || c.Timeout.AsDuration() != 10*time.Minute || c.Retained != 1 {
					t.Errorf("checkpointing = %v", c)
				}
			}},
		{"interval-during-backlog: unset is not 0", "name: x\ncheckpointing: {interval: 1s}\n" + vertices,
			func(t *testing.T, g *weirv1.JobGraph) {
				if g.Checkpointing.IntervalDuringBacklog != nil {
					t.Errorf("interval-during-backlog = %v, want unset", g.Checkpointing.IntervalDuringBacklog)
				}
			}},
		{"interval-during-backlog 0", "name: x\ncheckpointing: {interval: 1s, interval-during-backlog: 0s}\n" + vertices,
			func(t *testing.T, g *weirv1.JobGraph) {
				if d := g.Checkpointing.IntervalDuringBacklog; d == nil || d.AsDuration() != 0 {
					t.Errorf("interval-during-backlog = %v, want 0s", d)
				}
			}},
		{"null values count as absent", "name: x\nmax-parallelism:\ncheckpointing:\n" + vertices,
			func(t *testing.T, g *weirv1.JobGraph) {
				if g.MaxParallelism != 128 || g.Checkpointing.Timeout.AsDuration() != 10*time.Minute {
					t.Errorf("got %v", g)
				}
			}},
		{"config keeps nesting and text", "name: x\nvertices:\n  - name: a\n    operator: o\n    config: {n: 1.5, list: [1, two, true], nested: {day: 2024-01-01, none: ~}}\n",
			func(t *testing.T, g *weirv1.JobGraph) {
				want := mustStruct(t, map[string]any{"n": 1.5, "list": []any{1.0, "two", true},
					"nested": map[string]any{"day": "2024-01-01", "none": nil}})
				if !proto.Equal(g.Vertices[0].Config, want) {
					t.Errorf("config = %v, want %v", g.Vertices[0].Config, want)
				}
			}},
		{"restore-from", "name: x\nrestore-from: /tmp/sp-1\n" + vertices,
			func(t *testing.T, g *weirv1.JobGraph) {
				if g.RestoreFrom != "/tmp/sp-1" {
					t.Errorf("restore_from = %q", g.RestoreFrom)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseSpec([]byte(tt.spec))
			if err != nil {
				t.Fatalf("ParseSpec: %v", err)
			}
			tt.check(t, g)
		})
	}
}

// TestShippedSpecs: every job spec in examples/ and deploy/ parses and
// validates, so what the docs and compose comments tell users to submit
// is not refused.
func TestShippedSpecs(t *testing.T) {
	var files []string
	for _, dir := range []string{"examples", "deploy"} {
		fs, err := filepath.Glob(filepath.Join("..", "..", dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	if len(files) < 4 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		g, err := ParseSpecFile(f)
		if err == nil {
			err = Validate(g)
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestParseExampleFile(t *testing.T) {
	g, err := ParseSpecFile(filepath.Join("..", "..", "examples", "running-sum.yaml"))
	if err != nil {
		t.Fatalf("ParseSpecFile: %v", err)
	}
	if g.Name != "running-sum" || g.Checkpointing.Interval.AsDuration() != time.Second || g.Checkpointing.Retained != 3 {
		t.Errorf("unexpected graph %v", g)
	}
	if rate := g.Vertices[0].Config.Fields["rate"].GetNumberValue(); rate != 2000 {
		t.Errorf("source rate = %v, want 2000", rate)
	}
	if len(g.Vertices) != 3 {
		t.Errorf("got %d vertices, want 3", len(g.Vertices))
	}
}

func TestParseSpecFileErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nvertices: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ParseSpecFile(bad)
	if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), bad) {
		t.Errorf("error %q should wrap ErrInvalidSpec and name %s", err, bad)
	}
	_, err = ParseSpecFile(filepath.Join(dir, "missing.yaml"))
	if err == nil || errors.Is(err, ErrInvalidSpec) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: got %v, want a not-exist error that is not ErrInvalidSpec", err)
	}
}

func TestParseInvalid(t *testing.T) {
	const two = "vertices:\n  - {name: a, operator: o}\n  - {name: b, operator: o, inputs: [{from: a}]}\n"
	tests := []struct {
		name string
		spec string
		want string
	}{
		{"invalid yaml", "name: [x\n", "line 1: invalid YAML"},
		{"empty", "", "empty job spec"},
		{"only comments", "# nothing\n", "empty job spec"},
		{"not a mapping", "- a\n", "line 1: a job spec must be a mapping"},
		{"two documents", "name: x\n" + two + "---\nname: y\n", "line 5: a job spec is a single YAML document"},
		{"unknown top-level key", "name: x\nparallelism: 2\n" + two, "line 2: parallelism: unknown field"},
		{"unknown vertex key with hint", "name: x\nvertices:\n  - {name: a, operator: o, paralelism: 2}\n",
			`line 3: vertices[0].paralelism: unknown field (did you mean "parallelism"?)`},
		{"unknown input key", "name: x\nvertices:\n  - {name: a, operator: o}\n  - {name: b, operator: o, inputs: [{source: a}]}\n",
			"line 4: vertices[1].inputs[0].source: unknown field"},
		{"unknown checkpointing key", "name: x\ncheckpointing:\n  intervall: 1s\n" + two,
			`line 3: checkpointing.intervall: unknown field (did you mean "interval"?)`},
		{"duplicate key", "name: x\nname: y\n" + two, "line 2: name: duplicate key, first defined at line 1"},
		{"block of wrong shape", "name: x\ncheckpointing: [1s]\n" + two, "line 2: checkpointing: must be a mapping, got a list"},
		{"vertices not a list", "name: x\nvertices: {a: 1}\n", "line 2: vertices: must be a list, got a mapping"},
		{"bad duration", "name: x\ncheckpointing: {interval: 1x}\n" + two, `line 2: checkpointing.interval: invalid duration "1x"`},
		{"negative interval during backlog", "name: x\ncheckpointing: {interval-during-backlog: -1s}\n" + two, `checkpointing.interval-during-backlog: must not be negative, got -1s`},
		{"duration without unit", "name: x\ncheckpointing: {timeout: 1000}\n" + two, `checkpointing.timeout: invalid duration "1000"`},
		{"bad mode", "name: x\ncheckpointing: {mode: exactly_once}\n" + two,
			`checkpointing.mode: unknown mode "exactly_once" (want exactly-once or at-least-once)`},
		{"bad externalized", "name: x\ncheckpointing: {externalized: keep}\n" + two,
			`checkpointing.externalized: unknown retention "keep" (want delete-on-cancellation or retain-on-cancellation)`},
		{"bad bool", "name: x\ncheckpointing: {unaligned: sometimes}\n" + two, `checkpointing.unaligned: must be true or false, got "sometimes"`},
		{"bad int", "name: x\nvertices:\n  - {name: a, operator: o, parallelism: two}\n", `line 3: vertices[0].parallelism: must be an integer, got "two"`},
		{"int out of range", "name: x\nmax-parallelism: 99999999999\n" + two, "max-parallelism: 99999999999 is out of range"},
		{"missing name", two, "name: required"},
		{"negative buffer timeout", "name: x\nbuffer-timeout: -1ms\n" + two, "buffer-timeout: must be between 0s and 1m, got -1ms"},
		{"buffer timeout too long", "name: x\nbuffer-timeout: 2m\n" + two, "buffer-timeout: must be between 0s and 1m, got 2m"},
		{"bad buffer timeout", "name: x\nbuffer-timeout: fast\n" + two, `line 2: buffer-timeout: invalid duration "fast"`},
		{"autoscaler utilization", "name: x\nautoscaler: {enabled: true, target-utilization: 1.5}\n" + two, "autoscaler: target-utilization 1.5 is outside (0, 1]"},
		{"autoscaler window", "name: x\nautoscaler: {interval: 1m, metrics-window: 10s}\n" + two, "autoscaler: metrics-window 10s is shorter than interval 1m0s"},
		{"autoscaler vertex", "name: x\nautoscaler: {vertices: {c: {max-parallelism: 2}}}\n" + two, `autoscaler.vertices.c: the job has no vertex "c"`},
		{"autoscaler key", "name: x\nautoscaler: {target: 0.5}\n" + two, "autoscaler.target: unknown field"},
		{"autoscaler bounds", "name: x\nmax-parallelism: 8\nautoscaler: {max-parallelism: 16}\n" + two, "autoscaler.max-parallelism: 16 is above the job's max-parallelism 8"},
		{"no vertices", "name: x\n", "vertices: at least one vertex is required"},
		{"empty vertex list", "name: x\nvertices: []\n", "line 2: vertices: at least one vertex is required"},
		{"unknown vertex", "name: x\nvertices:\n  - {name: a, operator: o}\n  - {name: b, operator: o, inputs: [{from: foo}]}\n",
			`line 4: vertices[1].inputs[0].from: unknown vertex "foo"`},
		{"self input", "name: x\nvertices:\n  - {name: a, operator: o}\n  - {name: b, operator: o, inputs: [{from: b}]}\n",
			`vertices[1].inputs[0].from: vertex "b" cannot read its own output`},
		{"missing from", "name: x\nvertices:\n  - {name: a, operator: o}\n  - {name: b, operator: o, inputs: [{partition: hash}]}\n",
			"vertices[1].inputs[0].from: required"},
		{"duplicate input", "name: x\nvertices:\n  - {name: a, operator: o}\n  - {name: b, operator: o, inputs: [{from: a}, {from: a, partition: hash}]}\n",
			`vertices[1].inputs[1].from: duplicate input from "a" (also inputs[0])`},
		{"cycle", "name: x\nvertices:\n  - {name: src, operator: o}\n  - {name: a, operator: o, inputs: [{from: src}, {from: c}]}\n" +
			"  - {name: b, operator: o, inputs: [{from: a}]}\n  - {name: c, operator: o, inputs: [{from: b}]}\n",
			"line 4: vertices[1].inputs[1].from: cycle: a -> b -> c -> a"},
		{"no source", "name: x\nvertices:\n  - {name: a, operator: o, inputs: [{from: b}]}\n  - {name: b, operator: o, inputs: [{from: a}]}\n",
			"line 2: vertices: no source vertex"},
		{"forward parallelism mismatch", "name: x\nvertices:\n  - {name: source, operator: o, parallelism: 2}\n  - {name: sum, operator: o, parallelism: 4, inputs: [{from: source, partition: forward}]}\n",
			`line 4: vertices[1].inputs[0].partition: forward requires equal parallelism on both ends, but "source" has 2 and "sum" has 4`},
		{"duplicate vertex", "name: x\nvertices:\n  - {name: a, operator: o}\n  - {name: a, operator: p}\n",
			`line 4: vertices[1].name: duplicate vertex name "a" (also vertices[0])`},
		{"bad vertex name", "name: x\nvertices:\n  - {name: a b, operator: o}\n", `vertices[0].name: invalid vertex name "a b"`},
		{"missing vertex name", "name: x\nvertices:\n  - {operator: o}\n", "line 3: vertices[0].name: required"},
		{"missing operator", "name: x\nvertices:\n  - {name: a}\n", "vertices[0].operator: required"},
		{"bad partition", "name: x\nvertices:\n  - {name: a, operator: o}\n  - {name: b, operator: o, inputs: [{from: a, partition: shuffle}]}\n",
			`vertices[1].inputs[0].partition: unknown partition "shuffle" (want forward, hash, rebalance or broadcast)`},
		{"parallelism above max-parallelism", "name: x\nmax-parallelism: 128\nvertices:\n  - {name: a, operator: o, parallelism: 200}\n",
			"line 4: vertices[0].parallelism: 200 exceeds max-parallelism 128"},
		{"parallelism zero", "name: x\nvertices:\n  - {name: a, operator: o, parallelism: 0}\n", "vertices[0].parallelism: must be at least 1, got 0"},
		{"max-parallelism zero", "name: x\nmax-parallelism: 0\n" + two, "max-parallelism: must be between 1 and 32768, got 0"},
		{"max-parallelism too large", "name: x\nmax-parallelism: 40000\n" + two, "max-parallelism: must be between 1 and 32768, got 40000"},
		{"unaligned with at-least-once", "name: x\ncheckpointing: {mode: at-least-once, unaligned: true}\n" + two,
			"line 2: checkpointing.unaligned: unaligned checkpoints require mode exactly-once, got at-least-once"},
		{"interval below minimum", "name: x\ncheckpointing: {interval: 5ms}\n" + two, "checkpointing.interval: 5ms is below the minimum of 10ms"},
		{"negative interval", "name: x\ncheckpointing: {interval: -1s}\n" + two, "checkpointing.interval: must not be negative, got -1s"},
		{"zero timeout", "name: x\ncheckpointing: {timeout: 0s}\n" + two, "checkpointing.timeout: must be positive, got 0s"},
		{"negative min-pause", "name: x\ncheckpointing: {min-pause: -1s}\n" + two, "checkpointing.min-pause: must not be negative"},
		{"zero max-concurrent", "name: x\ncheckpointing: {max-concurrent: 0}\n" + two, "checkpointing.max-concurrent: must be at least 1, got 0"},
		{"zero retained", "name: x\ncheckpointing: {retained: 0}\n" + two, "checkpointing.retained: must be at least 1, got 0"},
		{"negative tolerable", "name: x\ncheckpointing: {tolerable-failed-checkpoints: -1}\n" + two,
			"checkpointing.tolerable-failed-checkpoints: must not be negative, got -1"},
		{"aligned timeout without unaligned", "name: x\ncheckpointing: {aligned-checkpoint-timeout: 1s}\n" + two,
			"checkpointing.aligned-checkpoint-timeout: only applies with unaligned: true"},
		{"bad restart type", "name: x\nrestart-strategy: {type: always}\n" + two,
			`restart-strategy.type: unknown type "always" (want none, fixed-delay or exponential-delay)`},
		{"negative attempts", "name: x\nrestart-strategy: {type: fixed-delay, attempts: -1}\n" + two,
			"restart-strategy.attempts: must not be negative, got -1"},
		{"multiplier below 1", "name: x\nrestart-strategy: {type: exponential-delay, multiplier: 0.5}\n" + two,
			"restart-strategy.multiplier: must be at least 1, got 0.5"},
		{"max-backoff below initial", "name: x\nrestart-strategy: {type: exponential-delay, initial-backoff: 10s, max-backoff: 1s}\n" + two,
			"restart-strategy.max-backoff: 1s is less than initial-backoff 10s"},
		{"delay with exponential", "name: x\nrestart-strategy: {type: exponential-delay, delay: 1s}\n" + two,
			"line 2: restart-strategy.delay: not used by restart type exponential-delay"},
		{"attempts with none", "name: x\nrestart-strategy: {attempts: 3}\n" + two,
			"restart-strategy.attempts: not used by restart type none"},
		{"bad backend", "name: x\nstate: {backend: rocksdb}\n" + two, `state.backend: unknown backend "rocksdb" (want heap or pebble)`},
		{"config not a mapping", "name: x\nvertices:\n  - {name: a, operator: o, config: [1]}\n", "line 3: vertices[0].config: must be a mapping, got a list"},
		{"config number too large", "name: x\nvertices:\n  - name: a\n    operator: o\n    config:\n      big: 12345678901234567890\n",
			"line 6: vertices[0].config.big: 12345678901234567890 is too large"},
		{"config duplicate key", "name: x\nvertices:\n  - name: a\n    operator: o\n    config:\n      k: 1\n      k: 2\n",
			"line 7: vertices[0].config.k: duplicate key, first defined at line 6"},
		{"config nan", "name: x\nvertices:\n  - {name: a, operator: o, config: {x: .nan}}\n", "vertices[0].config.x: .nan is not a finite number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseSpec([]byte(tt.spec))
			if err == nil {
				t.Fatalf("ParseSpec succeeded with %v, want error containing %q", g, tt.want)
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("error %v does not wrap ErrInvalidSpec", err)
			}
			if _, ok := errors.AsType[*SpecError](err); !ok {
				t.Errorf("error %v is not a *SpecError", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n  %v\nwant it to contain\n  %s", err, tt.want)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	_, err := ParseSpec([]byte("vertices:\n  - {name: a, operator: o, parallelism: 0}\n  - {name: b, inputs: [{from: zz}]}\n"))
	se, ok := errors.AsType[*SpecError](err)
	if !ok {
		t.Fatalf("got %v, want *SpecError", err)
	}
	var got []string
	for _, p := range se.Problems {
		got = append(got, p.String())
	}
	want := []string{
		"name: required",
		"line 2: vertices[0].parallelism: must be at least 1, got 0",
		"line 3: vertices[1].operator: required",
		`line 3: vertices[1].inputs[0].from: unknown vertex "zz"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(err.Error(), "4 problems") {
		t.Errorf("error %q should count the problems", err)
	}
}

func validGraph() *weirv1.JobGraph {
	g := &weirv1.JobGraph{
		Name: "proto-built",
		Vertices: []*weirv1.JobVertex{
			{Name: "src", Operator: "sequence-source", Parallelism: 2},
			{Name: "sum", Operator: "keyed-sum", Parallelism: 4,
				Inputs: []*weirv1.JobEdge{{Source: "src", Partitioner: weirv1.Partitioner_PARTITIONER_HASH}}},
		},
	}
	ApplyDefaults(g)
	return g
}

func TestValidateProto(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(g *weirv1.JobGraph)
		want   string
	}{
		{"valid after ApplyDefaults", func(*weirv1.JobGraph) {}, ""},
		{"nil checkpointing", func(g *weirv1.JobGraph) { g.Checkpointing = nil }, "checkpointing: missing"},
		{"unspecified mode", func(g *weirv1.JobGraph) { g.Checkpointing.Mode = 0 }, "checkpointing.mode: required (exactly-once or at-least-once)"},
		{"unknown mode number", func(g *weirv1.JobGraph) { g.Checkpointing.Mode = 42 }, "checkpointing.mode: unknown mode 42"},
		{"unspecified partitioner", func(g *weirv1.JobGraph) { g.Vertices[1].Inputs[0].Partitioner = 0 },
			"vertices[1].inputs[0].partition: required"},
		{"nil vertex", func(g *weirv1.JobGraph) { g.Vertices = append(g.Vertices, nil) }, "vertices[2]: missing"},
		{"invalid duration", func(g *weirv1.JobGraph) { g.Checkpointing.Timeout = &durationpb.Duration{Seconds: 1, Nanos: -1} },
			"checkpointing.timeout: invalid duration"},
		{"nil restart strategy", func(g *weirv1.JobGraph) { g.RestartStrategy = nil }, "restart-strategy: missing"},
		{"nan multiplier", func(g *weirv1.JobGraph) {
			g.RestartStrategy = &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY}
			ApplyDefaults(g)
			g.RestartStrategy.Multiplier = nanValue()
		}, "restart-strategy.multiplier: must be at least 1, got NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := validGraph()
			tt.mutate(g)
			before := proto.Clone(g)
			err := Validate(g)
			if !proto.Equal(before, g) {
				t.Errorf("Validate changed the graph")
			}
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate error = %v, want ErrInvalidSpec containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "line ") {
				t.Errorf("Validate has no YAML, yet reported a line: %v", err)
			}
		})
	}
	if err := Validate(nil); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("Validate(nil) = %v, want ErrInvalidSpec", err)
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

func TestApplyDefaultsMatchesParse(t *testing.T) {
	parsed, err := ParseSpec([]byte("name: x\nvertices:\n  - {name: a, operator: o}\n  - {name: b, operator: o, inputs: [{from: a}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	built := &weirv1.JobGraph{Name: "x", Vertices: []*weirv1.JobVertex{
		{Name: "a", Operator: "o"},
		{Name: "b", Operator: "o", Inputs: []*weirv1.JobEdge{{Source: "a"}}},
	}}
	ApplyDefaults(built)
	if !proto.Equal(parsed, built) {
		t.Errorf("ApplyDefaults differs from ParseSpec defaults\n got: %v\nwant: %v", built, parsed)
	}
	again := proto.Clone(built).(*weirv1.JobGraph)
	ApplyDefaults(again)
	if !proto.Equal(again, built) {
		t.Errorf("ApplyDefaults is not idempotent")
	}
}

func TestRoundTrip(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "running-sum.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]string{
		"example":         exampleSpec,
		"example file":    string(example),
		"minimal":         "name: m\nvertices:\n  - {name: a, operator: o}\n",
		"fixed-delay":     "name: f\nrestart-strategy: {type: fixed-delay, attempts: 5, delay: 1m30s}\nvertices:\n  - {name: a, operator: o}\n",
		"exponential":     "name: e\nrestart-strategy: {type: exponential-delay, multiplier: 1.5}\nvertices:\n  - {name: a, operator: o}\n",
		"tricky strings":  "name: \"123\"\nrestore-from: \"yes\"\nvertices:\n  - {name: \"true\", operator: \"null\", config: {s: \"1\", d: 2024-01-01, f: 0.25, neg: -3, e: {}, l: []}}\n",
		"unaligned":       "name: u\ncheckpointing: {interval: 250ms, unaligned: true, aligned-checkpoint-timeout: 2s, max-concurrent: 2}\nvertices:\n  - {name: a, operator: o}\n",
		"backlog":         "name: k\ncheckpointing: {interval: 1s, interval-during-backlog: 0s}\nvertices:\n  - {name: a, operator: o, slot-sharing-group: g}\n",
		"sql job":         "name: q\nsql: |-\n  INSERT INTO k\n  SELECT a, 'it''s' FROM s  \n  \tWHERE v < 10;\nvertices:\n  - {name: a, operator: o, description: \"Calc(where=[<(v, 10)]): a: b\"}\n  - name: b\n    operator: o\n    description: |\n      two\n      lines\n    inputs: [{from: a}]\n",
		"buffer timeout":  "name: t\nbuffer-timeout: 250µs\nvertices:\n  - {name: a, operator: o}\n",
		"no batching":     "name: t\nbuffer-timeout: 0s\nvertices:\n  - {name: a, operator: o}\n",
		"autoscaler":      "name: s\nautoscaler: {enabled: true, target-utilization: 0.6, interval: 5s, metrics-window: 30s, max-parallelism: 8, vertices: {a: {min-parallelism: 2}}}\nvertices:\n  - {name: a, operator: o}\n",
		"broadcast graph": "name: b\nvertices:\n  - {name: a, operator: o, parallelism: 3}\n  - {name: r, operator: o}\n  - {name: j, operator: o, parallelism: 4, inputs: [{from: a, partition: rebalance}, {from: r, partition: broadcast}]}\n",
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			g1, err := ParseSpec([]byte(spec))
			if err != nil {
				t.Fatalf("ParseSpec: %v", err)
			}
			out, err := MarshalSpec(g1)
			if err != nil {
				t.Fatalf("MarshalSpec: %v", err)
			}
			g2, err := ParseSpec(out)
			if err != nil {
				t.Fatalf("ParseSpec(MarshalSpec(g)): %v\n%s", err, out)
			}
			if !proto.Equal(g1, g2) {
				t.Errorf("round trip changed the graph\nspec:\n%s\n got: %v\nwant: %v", out, g2, g1)
			}
		})
	}
}

func TestMarshalSpecShape(t *testing.T) {
	g, err := ParseSpec([]byte(exampleSpec))
	if err != nil {
		t.Fatal(err)
	}
	out, err := MarshalSpec(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"name: running-sum\n", "max-parallelism: 128\n", "  interval: 1s\n", "  timeout: 1m\n",
		"  externalized: retain-on-cancellation\n", "  type: exponential-delay\n", "  multiplier: 2.0\n",
		"  reset-backoff-threshold: 1h\n", "  backend: pebble\n", "      count: 100000\n",
		"    inputs: [{from: source, partition: hash}]\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("MarshalSpec output lacks %q:\n%s", want, out)
		}
	}

	g.Checkpointing.Mode = 99
	if _, err := MarshalSpec(g); err == nil || !strings.Contains(err.Error(), "checkpointing.mode: unknown value 99") {
		t.Errorf("MarshalSpec with unknown enum: err = %v", err)
	}
}

func TestTopologicalOrder(t *testing.T) {
	names := func(vs []*weirv1.JobVertex) string {
		var s []string
		for _, v := range vs {
			s = append(s, v.Name)
		}
		return strings.Join(s, ",")
	}
	g, err := ParseSpec([]byte(`name: t
vertices:
  - {name: sink, operator: o, inputs: [{from: join}, {from: side}]}
  - {name: left, operator: o}
  - {name: join, operator: o, inputs: [{from: mapped}, {from: right}]}
  - {name: mapped, operator: o, inputs: [{from: left}]}
  - {name: right, operator: o}
  - {name: side, operator: o, inputs: [{from: right}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	order, err := TopologicalOrder(g)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(order), "left,right,mapped,side,join,sink"; got != want {
		t.Errorf("order = %s, want %s", got, want)
	}

	cyclic := validGraph()
	cyclic.Vertices = append(cyclic.Vertices, &weirv1.JobVertex{Name: "back", Operator: "o", Parallelism: 4,
		Inputs: []*weirv1.JobEdge{{Source: "sum", Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD}}})
	cyclic.Vertices[1].Inputs = append(cyclic.Vertices[1].Inputs, &weirv1.JobEdge{Source: "back", Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD})
	if _, err := TopologicalOrder(cyclic); !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "cycle: sum -> back -> sum") {
		t.Errorf("TopologicalOrder on a cycle: err = %v", err)
	}
	unknown := validGraph()
	unknown.Vertices[1].Inputs[0].Source = "nope"
	if _, err := TopologicalOrder(unknown); !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), `unknown vertex "nope"`) {
		t.Errorf("TopologicalOrder with unknown input: err = %v", err)
	}
}

func TestConsumers(t *testing.T) {
	g, err := ParseSpec([]byte(exampleSpec + "  - {name: audit, operator: print, parallelism: 1, inputs: [{from: source, partition: broadcast}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := Consumers(g, "source")
	want := []Consumer{
		{Vertex: "sum", Partitioner: weirv1.Partitioner_PARTITIONER_HASH},
		{Vertex: "audit", Partitioner: weirv1.Partitioner_PARTITIONER_BROADCAST},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Consumers(source) = %v, want %v", got, want)
	}
	if got := Consumers(g, "sink"); len(got) != 0 {
		t.Errorf("Consumers(sink) = %v, want none", got)
	}
}

// A job that names no restart strategy restarts with exponential-delay when
// it checkpoints (it has a state to come back to) and fails for good when
// it does not; ParseSpec and ApplyDefaults agree.
func TestDefaultRestartStrategy(t *testing.T) {
	const vertices = "vertices:\n  - {name: a, operator: o}\n"
	for _, tt := range []struct {
		spec     string
		explicit bool
		want     weirv1.RestartStrategy_Kind
	}{
		{"name: x\ncheckpointing: {interval: 1s}\n" + vertices, false, weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY},
		{"name: x\n" + vertices, false, weirv1.RestartStrategy_KIND_NONE},
		{"name: x\ncheckpointing: {interval: 1s}\nrestart-strategy: {type: none}\n" + vertices, true, weirv1.RestartStrategy_KIND_NONE},
	} {
		g, err := ParseSpec([]byte(tt.spec))
		if err != nil {
			t.Fatalf("%q: %v", tt.spec, err)
		}
		r := g.GetRestartStrategy()
		if r.GetKind() != tt.want {
			t.Errorf("%q: restart strategy %s, want %s", tt.spec, r.GetKind(), tt.want)
		}
		if tt.want == weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY &&
			(r.GetAttempts() != DefaultExponentialAttempts || r.GetInitialBackoff().AsDuration() != DefaultInitialBackoff) {
			t.Errorf("%q: exponential-delay without its defaults: %v", tt.spec, r)
		}
		if tt.explicit {
			continue
		}
		bare := &weirv1.JobGraph{Checkpointing: &weirv1.CheckpointConfig{Interval: g.GetCheckpointing().GetInterval()}}
		ApplyDefaults(bare)
		if !proto.Equal(bare.GetRestartStrategy(), r) {
			t.Errorf("%q: ApplyDefaults gives %v, ParseSpec %v", tt.spec, bare.GetRestartStrategy(), r)
		}
	}
}

// The built-in joins are checked at submission: configuration, two keyed
// inputs, and event time on both.
func TestValidateJoins(t *testing.T) {
	const sources = "name: x\nvertices:\n" +
		"  - {name: left, operator: sequence-source, watermarks: {max-out-of-orderness: 5ms}}\n" +
		"  - {name: right, operator: sequence-source, watermarks: {max-out-of-orderness: 5ms}}\n" +
		"  - {name: plain, operator: sequence-source}\n" +
		"  - {name: sum, operator: keyed-sum, inputs: [{from: left, partition: hash}]}\n"
	const both = "[{from: left, partition: hash}, {from: right, partition: hash}]"
	for _, tt := range []struct {
		name, join string
		want       []string // empty: valid
	}{
		{"interval join", "{name: j, operator: interval-join, config: {lower: -5ms, upper: 5ms}, inputs: " + both + "}", nil},
		{"window join", "{name: j, operator: window-join, config: {size: 1s}, inputs: " + both + "}", nil},
		{"watermarks through an operator", "{name: j, operator: window-join, config: {size: 1s}, inputs: [{from: sum, partition: hash}, {from: right, partition: hash}]}", nil},
		{"interval empty", "{name: j, operator: interval-join, config: {lower: 5ms, upper: -5ms}, inputs: " + both + "}",
			[]string{`line 7: vertices[4].config: config "upper": -5ms is below lower 5ms`}},
		{"interval missing upper", "{name: j, operator: interval-join, config: {lower: 0s}, inputs: " + both + "}",
			[]string{`vertices[4].config: config "upper": required`}},
		{"window no size", "{name: j, operator: window-join, inputs: " + both + "}",
			[]string{`line 7: vertices[4].config: config "size": required`}},
		{"window fractional size", "{name: j, operator: window-join, config: {size: 1500us}, inputs: " + both + "}",
			[]string{`vertices[4].config: config "size": must be a whole number of milliseconds, got 1.5ms`}},
		{"one input", "{name: j, operator: window-join, config: {size: 1s}, inputs: [{from: left, partition: hash}]}",
			[]string{`line 7: vertices[4].inputs: window-join joins exactly two inputs (left, then right), got 1`}},
		{"three inputs and a bad config", "{name: j, operator: interval-join, config: {lower: 1ms}, inputs: [{from: left, partition: hash}, {from: right, partition: hash}, {from: sum, partition: hash}]}",
			[]string{`vertices[4].config: config "upper": required`, `vertices[4].inputs: interval-join joins exactly two inputs (left, then right), got 3`}},
		{"not keyed", "{name: j, operator: window-join, config: {size: 1s}, inputs: [{from: left}, {from: right, partition: rebalance}]}",
			[]string{`vertices[4].inputs[0].partition: a join's inputs must be keyed: use partition: hash, not forward`,
				`vertices[4].inputs[1].partition: a join's inputs must be keyed: use partition: hash, not rebalance`}},
		{"no watermarks on the right", "{name: j, operator: interval-join, config: {lower: 0s, upper: 1s}, inputs: [{from: left, partition: hash}, {from: plain, partition: hash}]}",
			[]string{`vertices[4].inputs[1].from: a join runs on event time and needs a source with a watermarks strategy upstream of each input; none of "plain"'s sources has one`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseSpec([]byte(sources + "  - " + tt.join + "\n"))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("ParseSpec: %v", err)
				}
				// Validate of the proto agrees.
				if err := Validate(g); err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			se, ok := errors.AsType[*SpecError](err)
			if !ok {
				t.Fatalf("ParseSpec = %v, want a *SpecError", err)
			}
			if len(se.Problems) != len(tt.want) {
				t.Errorf("%d problems, want %d: %v", len(se.Problems), len(tt.want), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %v\nwant it to contain\n  %s", err, w)
				}
			}
		})
	}
}

// Bad event-time specs are refused at submit with the field and the
// reason.
func TestValidateEventTime(t *testing.T) {
	const source = "name: x\nvertices:\n" +
		"  - {name: src, operator: sequence-source, watermarks: {max-out-of-orderness: 200ms, idle-timeout: 5s}}\n" +
		"  - {name: plain, operator: sequence-source}\n"
	for _, tt := range []struct {
		name, vertex string
		want         []string // empty: valid
	}{
		{"tumbling", "{name: w, operator: window, config: {type: tumbling, size: 1s}, inputs: [{from: src, partition: hash}]}", nil},
		{"sliding", "{name: w, operator: window, config: {type: sliding, size: 10s, slide: 1s, aggregate: avg}, inputs: [{from: src, partition: hash}]}", nil},
		{"session", "{name: w, operator: window, config: {type: session, gap: 30s, allowed-lateness: 1s}, inputs: [{from: src, partition: hash}]}", nil},
		{"processing time needs no watermarks", "{name: w, operator: window, config: {type: tumbling, size: 1s, time: processing}, inputs: [{from: plain, partition: hash}]}", nil},
		{"late side output", "{name: late, operator: file-sink, config: {path: /tmp/x}, inputs: [{from: src, output: late, partition: forward}]}", nil},
		{"slide exceeds size", "{name: w, operator: window, config: {type: sliding, size: 5s, slide: 10s}, inputs: [{from: src, partition: hash}]}",
			[]string{`line 5: vertices[2].config: config "slide": 10s exceeds the window size 5s`}},
		{"session without gap", "{name: w, operator: window, config: {type: session}, inputs: [{from: src, partition: hash}]}",
			[]string{`vertices[2].config: config "gap": required for a session window`}},
		{"zero size", "{name: w, operator: window, config: {type: tumbling, size: 0s}, inputs: [{from: src, partition: hash}]}",
			[]string{`vertices[2].config: config "size": must be positive, got 0s`}},
		{"negative size", "{name: w, operator: window, config: {type: tumbling, size: -1s}, inputs: [{from: src, partition: hash}]}",
			[]string{`vertices[2].config: config "size": must be positive, got -1s`}},
		{"unknown aggregate", "{name: w, operator: window, config: {type: tumbling, size: 1s, aggregate: median}, inputs: [{from: src, partition: hash}]}",
			[]string{`vertices[2].config: config "aggregate": unknown aggregate "median"`}},
		{"no watermarked source", "{name: w, operator: window, config: {type: tumbling, size: 1s}, inputs: [{from: plain, partition: hash}]}",
			[]string{`vertices[2].config.time: an event-time window needs a source with a watermarks strategy upstream`}},
		{"watermarks on an operator", "{name: w, operator: keyed-sum, watermarks: {max-out-of-orderness: 1s}, inputs: [{from: src, partition: hash}]}",
			[]string{`vertices[2].watermarks: only a source vertex generates watermarks; "w" has inputs`}},
		{"negative out-of-orderness", "{name: s2, operator: sequence-source, watermarks: {max-out-of-orderness: -1s}}",
			[]string{`vertices[2].watermarks.max-out-of-orderness: must not be negative, got -1s`}},
		{"unknown watermarks key", "{name: s2, operator: sequence-source, watermarks: {max-out-of-order: 1s}}",
			[]string{`vertices[2].watermarks.max-out-of-order: unknown field (known fields: max-out-of-orderness, idle-timeout, interval)`}},
		{"bad output name", "{name: late, operator: file-sink, config: {path: /tmp/x}, inputs: [{from: src, output: 'a b', partition: forward}]}",
			[]string{`vertices[2].inputs[0].output: invalid output name "a b"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseSpec([]byte(source + "  - " + tt.vertex + "\n"))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("ParseSpec: %v", err)
				}
				if err := Validate(g); err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("ParseSpec accepted it")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %v\nwant it to contain\n  %s", err, w)
				}
			}
		})
	}
}

func TestWindowsExampleParses(t *testing.T) {
	if _, err := ParseSpecFile(filepath.Join("..", "..", "examples", "windows.yaml")); err != nil {
		t.Fatal(err)
	}
}
