package jobgraph

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
)

// FuzzParseSpec feeds arbitrary bytes to the spec parser, which reads what
// clients submit: it must refuse what it cannot use with a *SpecError, never
// panic, and what it accepts must survive MarshalSpec unchanged, since a
// stored graph is shown and edited in that form.
func FuzzParseSpec(f *testing.F) {
	// The specs users are told to submit, so mutations start from real
	// shapes: every key, flow and block style, comments.
	var files []string
	for _, pattern := range []string{"examples/*.yaml", "examples/*/*.yaml", "deploy/*.yaml"} {
		fs, err := filepath.Glob(filepath.Join("..", "..", pattern))
		if err != nil {
			f.Fatal(err)
		}
		files = append(files, fs...)
	}
	if len(files) < 5 {
		f.Fatalf("found only %v", files)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		exampleSpec,
		"name: m\nvertices:\n  - {name: a, operator: o}\n",
		"name: j\nvertices:\n  - {name: l, operator: o, watermarks: {max-out-of-orderness: 1s, idle-timeout: 5s}}\n  - {name: r, operator: o, watermarks: {max-out-of-orderness: 1s}}\n  - {name: j, operator: interval-join, inputs: [{from: l, partition: hash}, {from: r, partition: hash}], config: {lower: -1s, upper: 1s}}\n",
		"name: s\nvertices:\n  - {name: a, operator: o}\n  - {name: b, operator: o, inputs: [{from: a, partition: forward, output: late}]}\n",
		"name: x\nrestart-strategy: {type: none}\nstate: {backend: heap}\nchaining: false\nvertices:\n  - {name: a, operator: o, chaining: false, slot-sharing-group: g, config: {l: [1, 2.5, \"s\", {k: v}], n: null}}\n",
		"name: q\nsql: \"SELECT k,\\n  v FROM s;\"\nvertices:\n  - {name: a, operator: o, description: |\n      Calc(where=[v < 10])\n  }\n",
		"name: &a x\nvertices: [{name: *a, operator: o}]\n",
		"a: &a [*a]\n",
		"name: x\nvertices:\n  - {name: a, operator: o, parallelism: 99999999999999999999}\n",
		"name: x\nmax-parallelism: -1\ncheckpointing: {interval: -1s, timeout: 1e400s}\nvertices: []\n",
		"--- \nname: a\n---\nname: b\n",
		"[1, 2]",
		"",
		"\t",
		"{",
		"name: !!binary aGVsbG8=\nvertices:\n  - {name: a, operator: o}\n",
		"<<: {name: x}\nvertices:\n  - {name: a, operator: o}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ParseSpec(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("error does not wrap ErrInvalidSpec: %v", err)
			}
			if _, ok := errors.AsType[*SpecError](err); !ok {
				t.Fatalf("error is not a *SpecError: %T %v", err, err)
			}
			return
		}
		out, err := MarshalSpec(g)
		if err != nil {
			t.Fatalf("MarshalSpec of an accepted spec: %v\nspec:\n%s", err, data)
		}
		again, err := ParseSpec(out)
		if err != nil {
			t.Fatalf("ParseSpec(MarshalSpec(g)): %v\nspec:\n%s\nmarshalled:\n%s", err, data, out)
		}
		if !proto.Equal(g, again) {
			t.Fatalf("round trip changed the graph\nspec:\n%s\nmarshalled:\n%s\n got: %v\nwant: %v", data, out, again, g)
		}
	})
}
