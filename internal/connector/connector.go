// Package connector is the one place where the operators and connectors
// a job can name are described: each registers once with its documented
// configuration keys, the check of its configuration in the job it is
// part of, and the cluster-wide claims a running job makes through it
// (such as a transactional-ID prefix only one job may use). The job
// graph's validation and the JobManager iterate the registry and import
// no connector; the daemons and the CLI link the built-in ones through
// internal/connector/builtin. It is pure: no connector's client is
// linked to describe or check it.
package connector

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Kind is where in a job an operator stands.
type Kind int

const (
	// Source starts a stream.
	Source Kind = iota
	// Transform reads one or more streams and emits one.
	Transform
	// Sink ends a stream.
	Sink
)

func (k Kind) String() string {
	switch k {
	case Source:
		return "source"
	case Transform:
		return "operator"
	case Sink:
		return "sink"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Key documents one configuration key.
type Key struct {
	Name string
	// Type says what the value is: a string, a duration, one of a list…
	Type string
	// Default is its value when absent ("" when it has none or is
	// required).
	Default  string
	Required bool
	Doc      string
}

// Problem is what a check found wrong, at Path under the vertex's config
// ("" for the config as a whole, or a path from the job's root when
// Global, e.g. the job's checkpointing that a connector cannot work
// with).
type Problem struct {
	Path   string
	Global bool
	Msg    string
}

// Claim is something a running job holds that no other running job may
// hold at the same time: Kind and Value identify it, Why says what
// sharing it would break.
type Claim struct {
	Kind, Value, Why string
}

// Spec describes one operator or connector.
type Spec struct {
	// Name is what a vertex's operator (or connector) names.
	Name string
	Kind Kind
	// Doc is a paragraph on what it does.
	Doc  string
	Keys []Key
	// Check validates the configuration of vertex v in job g (nil: any
	// configuration the operator accepts at its start).
	Check func(g *weirv1.JobGraph, v *weirv1.JobVertex) []Problem
	// Claims are what a running job holds through v (nil: nothing).
	Claims func(v *weirv1.JobVertex) []Claim
}

var registry struct {
	sync.RWMutex
	specs map[string]Spec
}

// Register adds s. Registering a name twice is a programming error.
func Register(s Spec) {
	registry.Lock()
	defer registry.Unlock()
	if registry.specs == nil {
		registry.specs = map[string]Spec{}
	}
	if _, dup := registry.specs[s.Name]; dup {
		panic(fmt.Sprintf("connector: %s registered twice", s.Name))
	}
	registry.specs[s.Name] = s
}

// Lookup is the spec of name, if registered.
func Lookup(name string) (Spec, bool) {
	registry.RLock()
	defer registry.RUnlock()
	s, ok := registry.specs[name]
	return s, ok
}

// All is every spec registered, by name.
func All() []Spec {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Spec, 0, len(registry.specs))
	for _, s := range registry.specs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Claims are the claims of job g's vertices, with the vertex each comes
// from.
func Claims(g *weirv1.JobGraph, name func(*weirv1.JobVertex) string) []VertexClaim {
	var out []VertexClaim
	for _, v := range g.GetVertices() {
		s, ok := Lookup(name(v))
		if !ok || s.Claims == nil {
			continue
		}
		for _, c := range s.Claims(v) {
			out = append(out, VertexClaim{Vertex: v.GetName(), Claim: c})
		}
	}
	return out
}

// VertexClaim is a claim and the vertex that makes it.
type VertexClaim struct {
	Vertex string
	Claim
}

// Markdown is the reference of every registered spec: what
// docs/connectors-reference.md holds.
func Markdown() string {
	var b strings.Builder
	b.WriteString("# Operators and connectors: the reference\n\n")
	b.WriteString("Generated from the registry (`internal/connector`) by `make docs`; a test fails when it is stale.\n")
	b.WriteString("Every key goes under a vertex's `config`.\n")
	for _, k := range []Kind{Source, Transform, Sink} {
		var specs []Spec
		for _, s := range All() {
			if s.Kind == k {
				specs = append(specs, s)
			}
		}
		if len(specs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %ss\n", strings.ToUpper(k.String()[:1])+k.String()[1:])
		for _, s := range specs {
			fmt.Fprintf(&b, "\n### `%s`\n\n%s\n", s.Name, strings.TrimSpace(s.Doc))
			if len(s.Keys) == 0 {
				b.WriteString("\nNo configuration.\n")
				continue
			}
			b.WriteString("\n| key | type | default | what it does |\n|---|---|---|---|\n")
			for _, key := range s.Keys {
				def := key.Default
				switch {
				case key.Required:
					def = "required"
				case def == "":
					def = "—"
				case !strings.Contains(def, " "):
					def = "`" + def + "`"
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", key.Name, key.Type, def, strings.ReplaceAll(strings.TrimSpace(key.Doc), "\n", " "))
			}
		}
	}
	return b.String()
}
