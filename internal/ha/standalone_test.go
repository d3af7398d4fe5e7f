package ha

import (
	"context"
	"testing"

	"github.com/weirproject/weir/internal/checkpoint"
)

func TestStandaloneStoreKeepsNewestRetained(t *testing.T) {
	ctx := context.Background()
	s := NewStandaloneStore(2)
	var dropped []int64
	for id := int64(1); id <= 4; id++ {
		sub, err := s.Add(ctx, checkpoint.Completed{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range sub {
			dropped = append(dropped, c.ID)
		}
	}
	all, _ := s.All(ctx)
	if len(all) != 2 || all[0].ID != 3 || all[1].ID != 4 {
		t.Fatalf("retained %v", all)
	}
	if len(dropped) != 2 || dropped[0] != 1 || dropped[1] != 2 {
		t.Fatalf("subsumed %v", dropped)
	}
	if l, ok, _ := s.Latest(ctx); !ok || l.ID != 4 {
		t.Fatalf("latest %v", l)
	}
}

func TestStandaloneCounterStartsAfterExisting(t *testing.T) {
	c := NewStandaloneCounter(7)
	for want := int64(8); want < 11; want++ {
		if got, _ := c.Next(context.Background()); got != want {
			t.Fatalf("got %d, want %d", got, want)
		}
	}
}
