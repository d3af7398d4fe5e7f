package jobgraph

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// The *Doc types mirror the YAML spec. Leaves are yaml.Node so that the
// strict decode (KnownFields) only checks the shape and every value is
// converted afterwards (convert.go, values.go), where its path and line are
// known for the error message.
type specDoc struct {
	Name            yaml.Node         `yaml:"name"`
	MaxParallelism  yaml.Node         `yaml:"max-parallelism"`
	RestoreFrom     yaml.Node         `yaml:"restore-from"`
	Chaining        yaml.Node         `yaml:"chaining"`
	BufferTimeout   yaml.Node         `yaml:"buffer-timeout"`
	Checkpointing   *checkpointingDoc `yaml:"checkpointing"`
	RestartStrategy *restartDoc       `yaml:"restart-strategy"`
	State           *stateDoc         `yaml:"state"`
	Autoscaler      *autoscalerDoc    `yaml:"autoscaler"`
	Vertices        []vertexDoc       `yaml:"vertices"`
	// SQL is the statement of a job `weir sql` compiled.
	SQL yaml.Node `yaml:"sql"`
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
	IntervalDuringBacklog      yaml.Node `yaml:"interval-during-backlog"`
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
	Chaining    yaml.Node  `yaml:"chaining"`
	Config      yaml.Node  `yaml:"config"`
	Inputs      []inputDoc `yaml:"inputs"`
	// Watermarks is a source's watermark strategy.
	Watermarks *watermarksDoc `yaml:"watermarks"`
	// Description is the part of a SQL job's plan the vertex runs.
	Description yaml.Node `yaml:"description"`
	// ChangelogMode is a SQL vertex's output's changelog mode.
	ChangelogMode yaml.Node `yaml:"changelog-mode"`
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
