package jobgraph

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidSpec is wrapped by every error about the content of a job spec or
// job graph, so callers (the CLI, the JobManager's SubmitJob) can tell a
// user's mistake from an I/O failure with errors.Is.
var ErrInvalidSpec = errors.New("jobgraph: invalid job spec")

// Problem is one thing wrong with a job spec.
type Problem struct {
	// Path names the field in the spec's YAML key names, such as
	// "vertices[1].inputs[0].from"; empty for problems with the document as a
	// whole.
	Path string
	// Line is the 1-based line in the YAML source, or 0 when unknown (always
	// 0 from Validate, which sees only the proto).
	Line int
	// Msg says why the field is wrong.
	Msg string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// SpecError reports every problem found rather than the first, so that a
// user fixes a spec in one round trip.
type SpecError struct {
	// File is the spec's path when it was read by ParseSpecFile.
	File     string
	Problems []Problem
}

func (e *SpecError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalidSpec.Error())
	if e.File != "" {
		b.WriteString(" ")
		b.WriteString(e.File)
	}
	switch len(e.Problems) {
	case 0:
		// Only reachable by constructing a SpecError by hand.
	case 1:
		b.WriteString(": ")
		b.WriteString(e.Problems[0].String())
	default:
		fmt.Fprintf(&b, ": %d problems:", len(e.Problems))
		for _, p := range e.Problems {
			b.WriteString("\n\t")
			b.WriteString(p.String())
		}
	}
	return b.String()
}

func (e *SpecError) Unwrap() error { return ErrInvalidSpec }

// problems accumulates Problems; the zero value is ready to use.
type problems []Problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (ps *problems) addAt(line int, path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &SpecError{Problems: ps}
}
