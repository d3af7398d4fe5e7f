package builtin

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirproject/weir/internal/connector"
	"github.com/weirproject/weir/internal/sql/plan"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
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
		"interval-join", "window-join", "file-sink", "kafka-sink", "sql-calc", "sql-window-aggregate", "sql-join", "blackhole"} {
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

// TestSQLPlanChecked: a SQL operator's vertex is refused at submission
// when its plan is missing, does not decode, or is another operator's.
func TestSQLPlanChecked(t *testing.T) {
	calc, err := plan.Marshal(&plan.Operator{Calc: &plan.Calc{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		operator string
		cfg      map[string]any
		want     string // "" for none
	}{
		{"sql-calc", map[string]any{"plan": calc}, ""},
		{"sql-calc", map[string]any{}, "required"},
		{"sql-calc", map[string]any{"plan": 1.0}, "want a string"},
		{"sql-calc", map[string]any{"plan": "{"}, "sql plan"},
		{"sql-join", map[string]any{"plan": calc}, "not a plan of sql-join"},
		{"sql-window-aggregate", map[string]any{"plan": calc}, "not a plan of sql-window-aggregate"},
	} {
		cfg, err := structpb.NewStruct(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := connector.Lookup(tc.operator)
		ps := s.Check(nil, &weirv1.JobVertex{Operator: tc.operator, Config: cfg})
		switch {
		case tc.want == "" && len(ps) > 0:
			t.Errorf("%s %v: %v, want no problem", tc.operator, tc.cfg, ps)
		case tc.want != "" && (len(ps) != 1 || ps[0].Path != "plan" || !strings.Contains(ps[0].Msg, tc.want)):
			t.Errorf("%s %v: %v, want a problem of plan containing %q", tc.operator, tc.cfg, ps, tc.want)
		}
	}
}
