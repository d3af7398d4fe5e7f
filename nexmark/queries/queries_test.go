package queries

import (
	"slices"
	"testing"

	"github.com/weirproject/weir/internal/nexmark"
)

func TestBuildEveryQuery(t *testing.T) {
	for _, q := range Names {
		for _, out := range []string{"", t.TempDir()} {
			j, err := Build(q, Options{Events: 1000, Parallelism: 2, Out: out, Pebble: true, Incremental: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Graph(); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	reg, err := Registry()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range Names {
		for _, sink := range []string{"-discard", "-out"} {
			if _, _, err := reg.Lookup("go:" + q + sink); err != nil {
				t.Errorf("the TaskManagers' registry: %v", err)
			}
		}
	}
	if _, err := Build("q6", Options{}); err == nil {
		t.Fatal("Build(q6) succeeded; q6 is not one of the queries")
	}
}

// The oracle's rows for small runs: every query has some, and the
// stateless ones have exactly the rows their definition says.
func TestOracle(t *testing.T) {
	const events = 60_000
	cfg := nexmark.Config{FirstEventRate: 1000}
	bids := 0
	for n := range int64(events) {
		if nexmark.KindOf(n) == nexmark.KindBid {
			bids++
		}
	}
	for _, q := range Names {
		lines, err := Oracle(q, cfg, events)
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) == 0 {
			t.Errorf("%s: no rows", q)
		}
		again, _ := Oracle(q, cfg, events)
		slices.Sort(lines)
		slices.Sort(again)
		if !slices.Equal(lines, again) {
			t.Errorf("%s: two runs of the oracle differ", q)
		}
		switch q {
		case "q0", "q1":
			if len(lines) != bids {
				t.Errorf("%s: %d rows, want one per bid (%d)", q, len(lines), bids)
			}
		case "q2":
			if len(lines) >= bids/10 {
				t.Errorf("q2: %d rows of %d bids: the selection selects too much", len(lines), bids)
			}
		}
		t.Logf("%s: %d rows", q, len(lines))
	}
	if _, err := Oracle("q6", cfg, 10); err == nil {
		t.Fatal("Oracle(q6) succeeded")
	}
}
