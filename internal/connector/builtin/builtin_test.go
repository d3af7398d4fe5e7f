package builtin

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirproject/weir/internal/connector"
)

var update = flag.Bool("update", false, "rewrite docs/connectors-reference.md from the registry")

// TestReference: docs/connectors-reference.md is the registry's reference
// of every built-in operator and connector (make docs rewrites it).
func TestReference(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "connectors-reference.md")
	want := connector.Markdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("docs/connectors-reference.md is stale: run make docs and commit it")
	}
}

// TestEveryBuiltinRegistered: what the job specs may name is in the
// registry, documented.
func TestEveryBuiltinRegistered(t *testing.T) {
	for _, name := range []string{"sequence-source", "nexmark-source", "kafka-source", "keyed-sum", "window",
		"interval-join", "window-join", "file-sink", "kafka-sink"} {
		s, ok := connector.Lookup(name)
		if !ok {
			t.Errorf("%s is not registered", name)
			continue
		}
		if s.Doc == "" {
			t.Errorf("%s has no documentation", name)
		}
		for _, k := range s.Keys {
			if k.Doc == "" || k.Type == "" {
				t.Errorf("%s: key %s is not documented", name, k.Name)
			}
		}
	}
}
