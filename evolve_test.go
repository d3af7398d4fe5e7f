package weir

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirproject/weir/internal/sdktest"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// evolve writes v under key "k" into a value, a list and a map state of
// type A, then declares the states as type B in a program restored from
// that schema and returns what it reads, and the first error.
func evolve[A, B any](t *testing.T, v A) (value B, list []B, entry B, err error) {
	t.Helper()
	c := sdktest.NewContext("v", nil, 0, 1)
	scope := func() *ttlScope {
		return &ttlScope{c: c, k: &keyedScope{ctx: c, schema: openSchema(c, "v"), values: map[string]sdk.ValueState{}, maps: map[string]sdk.MapState{}}}
	}
	first := scope().at(0, "k")
	NewValueState[A]("value").Update(first, v)
	NewListState[A]("list").Update(first, []A{v, v})
	NewMapState[string, A]("map").Put(first, "e", v)
	NewValueState[A]("ttl", TTL(1e12)).Update(first, v)
	if first.k.err != nil {
		t.Fatal(first.k.err)
	}
	first.k.schema.save()

	second := scope().at(1, "k")
	value, _ = NewValueState[B]("value").Value(second)
	list = NewListState[B]("list").Get(second)
	entry, _ = NewMapState[string, B]("map").Get(second, "e")
	ttl, _ := NewValueState[B]("ttl", TTL(1e12)).Value(second)
	if second.k.err == nil && !equalAny(ttl, value) {
		t.Fatalf("the TTL state migrated to %+v, the plain one to %+v", ttl, value)
	}
	return value, list, entry, second.k.err
}

func equalAny(a, b any) bool { return fmtV(a) == fmtV(b) }

func fmtV(v any) string {
	if m, ok := v.(interface{ String() string }); ok {
		return m.String()
	}
	return fmt.Sprintf("%+v", v)
}

type accV1 struct {
	Count int32
	Sum   float32
	Name  string
	Tags  []string
	Old   []byte
}

// accV2 reorders, removes Old, adds Max (zero) and Unit (a default) and
// widens Count and Sum; Inner is a nested struct whose fields evolve too.
type accV2 struct {
	Name  string
	Unit  string `weir:"default=ms"`
	Sum   float64
	Tags  []string
	Count int64
	Max   uint64 `weir:"default=0"`
}

func TestSchemaEvolution(t *testing.T) {
	in := accV1{Count: -7, Sum: 2.5, Name: "n", Tags: []string{"a", "b"}, Old: []byte("gone")}
	want := accV2{Name: "n", Unit: "ms", Sum: 2.5, Tags: []string{"a", "b"}, Count: -7}
	value, list, entry, err := evolve[accV1, accV2](t, in)
	if err != nil {
		t.Fatal(err)
	}
	if fmtV(value) != fmtV(want) || fmtV(entry) != fmtV(want) || len(list) != 2 || fmtV(list[1]) != fmtV(want) {
		t.Fatalf("read %+v, %+v, %+v; want %+v", value, list, entry, want)
	}

	// Each rule alone.
	type one struct{ A int32 }
	type added struct {
		A int32
		B string `weir:"default=x"`
		C int64
	}
	if v, _, _, err := evolve[one, added](t, one{A: 3}); err != nil || v != (added{A: 3, B: "x"}) {
		t.Fatalf("a field added: %+v, %v", v, err)
	}
	type removed struct{}
	if _, _, _, err := evolve[added, removed](t, added{A: 3, B: "y", C: 9}); err != nil {
		t.Fatalf("fields removed: %v", err)
	}
	type reordered struct {
		C int64
		A int32
		B string
	}
	if v, _, _, err := evolve[added, reordered](t, added{A: 3, B: "y", C: 9}); err != nil || v != (reordered{A: 3, B: "y", C: 9}) {
		t.Fatalf("fields reordered: %+v, %v", v, err)
	}
	type widened struct {
		A float64
	}
	if v, _, _, err := evolve[one, widened](t, one{A: -3}); err != nil || v != (widened{A: -3}) {
		t.Fatalf("int32 to float64: %+v, %v", v, err)
	}
	type nested struct{ In []one }
	type nestedWide struct{ In []widened }
	if v, _, _, err := evolve[nested, nestedWide](t, nested{In: []one{{1}, {2}}}); err != nil || len(v.In) != 2 || v.In[1].A != 2 {
		t.Fatalf("a nested field widened: %+v, %v", v, err)
	}
	if v, _, _, err := evolve[uint16, int32](t, 65535); err != nil || v != 65535 {
		t.Fatalf("uint16 to int32: %v, %v", v, err)
	}
	if v, _, _, err := evolve[int8, int](t, -128); err != nil || v != -128 {
		t.Fatalf("int8 to int: %v, %v", v, err)
	}

	type renamed struct {
		Total int32 `weir:"was=A"`
	}
	if v, _, _, err := evolve[one, renamed](t, one{A: 42}); err != nil || v.Total != 42 {
		t.Fatalf("a field renamed: %+v, %v", v, err)
	}

	// Protobuf's rules: a message read as another with field 1 of a
	// compatible type keeps the field it knows and the rest as unknown.
	p, _, _, err := evolve[*weirv1.KeyGroupRange, *wrapperspb.Int64Value](t, &weirv1.KeyGroupRange{Start: 5, End: 9})
	if err != nil || p.GetValue() != 5 {
		t.Fatalf("protobuf evolution: %v, %v", p, err)
	}
}

func TestSchemaEvolutionRefused(t *testing.T) {
	type a struct {
		Inner struct{ N int64 }
	}
	type narrowed struct {
		Inner struct{ N int32 }
	}
	type retyped struct {
		Inner struct{ N string }
	}
	type badDefault struct {
		Inner struct{ N int64 }
		D     int `weir:"default=many"`
	}
	for _, c := range []struct {
		name string
		run  func() error
		want string
	}{
		{"narrowed", func() error { _, _, _, err := evolve[a, narrowed](t, a{}); return err },
			`weir: vertex "v": state "value" cannot be restored: field Inner.N: int64 in the checkpoint or savepoint restored, int32 in this program: only added, removed and reordered struct fields and widened numbers migrate`},
		{"retyped", func() error { _, _, _, err := evolve[a, retyped](t, a{}); return err },
			`field Inner.N: int64 in the checkpoint or savepoint restored, string in this program`},
		{"a struct became a number", func() error { _, _, _, err := evolve[a, int64](t, a{}); return err },
			`the value: struct{Inner struct{N int64}} in the checkpoint or savepoint restored, int64 in this program`},
		{"a bad default", func() error { _, _, _, err := evolve[a, badDefault](t, a{}); return err },
			`field D: default "many"`},
		{"a rename not said", func() error {
			type v1 struct{ Count int64 }
			type v2 struct{ Total int64 }
			_, _, _, err := evolve[v1, v2](t, v1{Count: 3})
			return err
		}, "field Count removed and field Total added: if it was renamed, tag the new field `weir:\"was=Count\"`; if it is new, give it a default"},
		{"float64 to float32", func() error { _, _, _, err := evolve[float64, float32](t, 1); return err },
			`the value: float64 in the checkpoint or savepoint restored, float32 in this program`},
	} {
		err := c.run()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

type nameT string

// A plain string value and one of a named string type are written
// differently (whole, or length first): a change between them migrates.
func TestSchemaEvolutionNamedStrings(t *testing.T) {
	if v, _, _, err := evolve[string, nameT](t, "hello"); err != nil || v != "hello" {
		t.Fatalf("string to a named string: %q, %v", v, err)
	}
	if v, _, _, err := evolve[nameT, string](t, "hello"); err != nil || v != "hello" {
		t.Fatalf("a named string to string: %q, %v", v, err)
	}
	type blob []byte
	if v, _, _, err := evolve[blob, []byte](t, blob("hi")); err != nil || string(v) != "hi" {
		t.Fatalf("a named []byte to []byte: %q, %v", v, err)
	}
}
