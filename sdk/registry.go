package sdk

import (
	"fmt"
	"sort"
)

// Registry maps operator names used in job specs to constructors.
type Registry struct {
	operators map[string]func() Operator
	sources   map[string]func() Source
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{operators: map[string]func() Operator{}, sources: map[string]func() Source{}}
}

// RegisterOperator adds a processing operator. It panics on a duplicate name,
// which is a programming error in the binary that registers them.
func (r *Registry) RegisterOperator(name string, f func() Operator) {
	r.mustBeNew(name)
	r.operators[name] = f
}

// RegisterSource adds a source operator.
func (r *Registry) RegisterSource(name string, f func() Source) {
	r.mustBeNew(name)
	r.sources[name] = f
}

func (r *Registry) mustBeNew(name string) {
	_, op := r.operators[name]
	_, src := r.sources[name]
	if op || src {
		panic(fmt.Sprintf("sdk: operator %q registered twice", name))
	}
}

// Lookup returns a new instance of the named operator: either a Source or an
// Operator.
func (r *Registry) Lookup(name string) (Source, Operator, error) {
	if f, ok := r.sources[name]; ok {
		return f(), nil, nil
	}
	if f, ok := r.operators[name]; ok {
		return nil, f(), nil
	}
	return nil, nil, fmt.Errorf("sdk: this TaskManager has no operator %q (it has %v): its binary was built without it, or from another version of the job's program", name, r.Names())
}

// Names lists the registered operator names, sorted.
func (r *Registry) Names() []string {
	var names []string
	for n := range r.operators {
		names = append(names, n)
	}
	for n := range r.sources {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
