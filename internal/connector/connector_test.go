package connector

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func TestRegistry(t *testing.T) {
	Register(Spec{Name: "test-b", Kind: Sink, Doc: "B.", Keys: []Key{{Name: "k", Type: "string", Required: true, Doc: "A key."}},
		Claims: func(v *weirv1.JobVertex) []Claim {
			return []Claim{{Kind: "thing", Value: v.GetConfig().GetFields()["k"].GetStringValue(), Why: "only one"}}
		}})
	Register(Spec{Name: "test-a", Kind: Source, Doc: "A."})
	defer func() {
		registry.Lock()
		delete(registry.specs, "test-a")
		delete(registry.specs, "test-b")
		registry.Unlock()
	}()
	if _, ok := Lookup("test-a"); !ok {
		t.Fatal("test-a not found")
	}
	var names []string
	for _, s := range All() {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "test-a,test-b" {
		t.Fatalf("All() = %v, want by name", names)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("registering a name twice did not panic")
			}
		}()
		Register(Spec{Name: "test-a"})
	}()
	cfg, _ := structpb.NewStruct(map[string]any{"k": "x"})
	g := &weirv1.JobGraph{Vertices: []*weirv1.JobVertex{{Name: "src", Operator: "test-a"}, {Name: "out", Operator: "test-b", Config: cfg}}}
	claims := Claims(g, func(v *weirv1.JobVertex) string { return v.GetOperator() })
	if len(claims) != 1 || claims[0].Vertex != "out" || claims[0].Value != "x" {
		t.Fatalf("claims %+v", claims)
	}
	md := Markdown()
	for _, want := range []string{"## Sources", "### `test-a`", "## Sinks", "| `k` | string | required | A key. |"} {
		if !strings.Contains(md, want) {
			t.Fatalf("the reference lacks %q:\n%s", want, md)
		}
	}
}
