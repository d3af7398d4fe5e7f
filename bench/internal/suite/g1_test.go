package suite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/bench/internal/goapijob"
	"github.com/weirproject/weir/internal/jobgraph"
)

// TestG1SameShape checks that G1's two jobs have the same vertices,
// parallelism, edges and checkpoint settings: only the operators differ.
func TestG1SameShape(t *testing.T) {
	g, err := goapijob.Job().Graph()
	if err != nil {
		t.Fatal(err)
	}
	bi, err := jobgraph.ParseSpec([]byte(g1BuiltinSpec()))
	if err != nil {
		t.Fatalf("%v\n%s", err, g1BuiltinSpec())
	}
	if len(g.Vertices) != len(bi.Vertices) {
		t.Fatalf("Go API job has %d vertices, built-in %d", len(g.Vertices), len(bi.Vertices))
	}
	for i, gv := range g.Vertices {
		bv := bi.Vertices[i]
		if gv.Name != bv.Name || gv.Parallelism != bv.Parallelism {
			t.Errorf("vertex %d: Go API %s p=%d, built-in %s p=%d", i, gv.Name, gv.Parallelism, bv.Name, bv.Parallelism)
		}
		if len(gv.Inputs) != len(bv.Inputs) {
			t.Errorf("vertex %s: Go API has %d inputs, built-in %d", gv.Name, len(gv.Inputs), len(bv.Inputs))
			continue
		}
		for k := range gv.Inputs {
			if !proto.Equal(gv.Inputs[k], bv.Inputs[k]) {
				t.Errorf("vertex %s input %d: Go API %v, built-in %v", gv.Name, k, gv.Inputs[k], bv.Inputs[k])
			}
		}
	}
	if !proto.Equal(g.Checkpointing, bi.Checkpointing) || !proto.Equal(g.State, bi.State) || g.MaxParallelism != bi.MaxParallelism {
		t.Errorf("settings differ: Go API %v %v %d, built-in %v %v %d", g.Checkpointing, g.State, g.MaxParallelism, bi.Checkpointing, bi.State, bi.MaxParallelism)
	}
}

// TestG1TaskManager checks the script the Go-API TaskManagers start as.
func TestG1TaskManager(t *testing.T) {
	dir := t.TempDir()
	path, err := g1TaskManager(dir, "/x/bin/bench-goapi")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode()&0o100 == 0 || filepath.Base(path) != "bench-goapi-taskmanager" {
		t.Errorf("%s: mode %v", path, st.Mode())
	}
	if !strings.Contains(string(b), `exec '/x/bin/bench-goapi' taskmanager --state-dir '`+dir+`'/state-$$ "$@"`) {
		t.Errorf("script:\n%s", b)
	}
}
