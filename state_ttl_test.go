package weir

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/sdktest"
	"github.com/weirproject/weir/sdk"
)

// ttlScope is a StateContext over a test subtask whose clock the test sets.
type ttlScope struct {
	c *sdktest.Context
	k *keyedScope
}

func newTTLScope(restored map[string]string) *ttlScope {
	c := sdktest.NewContext("v", nil, 0, 1)
	k := &keyedScope{ctx: c, schema: openSchema(c, "v"), values: map[string]sdk.ValueState{}, maps: map[string]sdk.MapState{}}
	for n, typ := range restored {
		k.schema.restored[n] = typ
	}
	return &ttlScope{c: c, k: k}
}

func (s *ttlScope) scope() *keyedScope { return s.k }

// at sets the clock to ms after an epoch and scopes state to key.
func (s *ttlScope) at(ms int64, key string) *ttlScope {
	s.c.Heap.AdvanceTime(1_700_000_000_000 + ms)
	s.c.Heap.SetCurrentKey([]byte(key))
	return s
}

func TestStateTTL(t *testing.T) {
	s := newTTLScope(nil)
	v := NewValueState[int64]("v", TTL(time.Second))
	r := NewValueState[string]("r", TTL(time.Second, OnReadAndWrite))
	m := NewMapState[string, int64]("m", TTL(time.Second))
	l := NewListState[int64]("l", TTL(time.Second))

	s.at(0, "a")
	v.Update(s, 7)
	r.Update(s, "x")
	m.Put(s, "one", 1)
	l.Add(s, 1)
	s.at(600, "a")
	m.Put(s, "two", 2)
	l.Add(s, 2)
	if got, ok := r.Value(s); !ok || got != "x" {
		t.Fatalf("r at 600 ms = %q, %v", got, ok)
	}
	s.at(999, "a")
	if got, ok := v.Value(s); !ok || got != 7 {
		t.Fatalf("v at 999 ms = %d, %v", got, ok)
	}
	s.at(1000, "a")
	if _, ok := v.Value(s); ok {
		t.Fatal("v read at 1000 ms, when it expired")
	}
	if _, ok := m.Get(s, "one"); ok {
		t.Fatal("m[one] read at 1000 ms, when it expired")
	}
	var keys []string
	m.All(s, func(k string, _ int64) bool { keys = append(keys, k); return true })
	if !slices.Equal(keys, []string{"two"}) {
		t.Fatalf("m at 1000 ms holds %v", keys)
	}
	// The list expires as a whole, its TTL restarted by the second Add.
	if got := l.Get(s); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("l at 1000 ms = %v", got)
	}
	s.at(1599, "a")
	if _, ok := r.Value(s); !ok {
		t.Fatal("r, read at 600 ms, gone at 1599 ms")
	}
	s.at(1600, "a")
	if got := l.Get(s); got != nil {
		t.Fatalf("l at 1600 ms = %v", got)
	}
	if s.k.err != nil {
		t.Fatal(s.k.err)
	}
}

func TestStateTTLRefused(t *testing.T) {
	s := newTTLScope(nil)
	v := NewValueState[int64]("v", TTL(0))
	s.at(0, "a")
	v.Update(s, 1)
	if s.k.err == nil || !strings.Contains(s.k.err.Error(), `state "v": a TTL of 0s; at least 1ms`) {
		t.Fatalf("err = %v", s.k.err)
	}

	// A state restored without a TTL is refused with one, and the
	// other way round, before a value is misread.
	for _, c := range []struct {
		restored string
		decl     *ValueState[int64]
		want     string
	}{
		{"value int64", NewValueState[int64]("n", TTL(time.Hour)), `state "n" is value int64 in the checkpoint or savepoint restored, but value int64 with TTL in this program`},
		{"value int64 with TTL", NewValueState[int64]("n"), `state "n" is value int64 with TTL in the checkpoint or savepoint restored, but value int64 in this program`},
	} {
		s := newTTLScope(map[string]string{"n": c.restored})
		s.at(0, "a")
		c.decl.Value(s)
		if s.k.err == nil || !strings.Contains(s.k.err.Error(), c.want) {
			t.Fatalf("restored %q: err = %v", c.restored, s.k.err)
		}
	}
	// The TTL's duration may change: the expiry travels with each value.
	s = newTTLScope(map[string]string{"n": "value int64 with TTL"})
	s.at(0, "a")
	NewValueState[int64]("n", TTL(time.Minute)).Value(s)
	if s.k.err != nil {
		t.Fatal(s.k.err)
	}
}
