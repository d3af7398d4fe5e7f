package kafka

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The source keeps the collector of its first Emit for every split
// (source.go, Emit: p.out = sourceSplit(out, …) once, when !s.opened), as
// the runtime allows: it hands the same output to every Emit. A drain of
// the nemesis must do the same, or what a later drain reads is counted,
// and its sink's errors are kept, on the first drain's collector.

// newDrainNemesis is a nemesis with one source and one sink open on a
// fresh broker, and k records appended.
func newDrainNemesis(t *testing.T, k int) *nemesis {
	t.Helper()
	n := &nemesis{
		t: t, proto: "kafka-3.9", rng: rand.New(rand.NewPCG(1, 2)),
		res:    &nemResult{proto: "kafka-3.9", faults: map[string]int{}, broker: &txnLog{}, subtasks: &txnLog{}},
		dir:    t.TempDir(),
		port:   nemPort(t),
		ends:   map[int32]int64{},
		now:    time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		opened: map[string]time.Time{},
	}
	t.Cleanup(n.shutdown)
	if err := n.startBroker(); err != nil {
		t.Fatal(err)
	}
	n.parallelism = 1
	if err := n.restore(0, 1, false); err != nil {
		t.Fatal(err)
	}
	if err := n.append(k); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNemesisDrainCountsItsOwnRecords: the records-read of a drain's
// report are the ones that drain read.
func TestNemesisDrainCountsItsOwnRecords(t *testing.T) {
	n := newDrainNemesis(t, 6)
	if err := n.drain(0); err != nil {
		t.Fatal(err)
	}
	if err := n.append(6); err != nil {
		t.Fatal(err)
	}
	if err := n.drain(0); err != nil {
		t.Fatal(err)
	}
	var drains []string
	for _, l := range strings.Split(n.res.subtasks.String(), "\n") {
		if strings.HasPrefix(l, "nemesis: drain") {
			drains = append(drains, l)
		}
	}
	if len(drains) != 2 || !strings.Contains(drains[1], ": 6 records into sink 0") {
		t.Fatalf("the second drain read 6 records; the reports say:\n%s", strings.Join(drains, "\n"))
	}
}

// TestNemesisDrainFailsOnALaterSinkError: a sink that refuses a record in
// a drain after the source's first fails that drain. (The sink's refusal
// is forced here: the producers of its free slots are already in a
// transaction, so its BeginTransaction fails, an error the sink's failed()
// does not report.)
func TestNemesisDrainFailsOnALaterSinkError(t *testing.T) {
	n := newDrainNemesis(t, 6)
	if err := n.drain(0); err != nil {
		t.Fatal(err)
	}
	// Pre-commit the open transaction: the next record opens a new one,
	// on the next slot.
	id, err := n.checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	n.complete(id)
	sk := n.sinks[0]
	for i := range 8 { // every slot the sink's next begin may take
		cl, err := sk.producer(i)
		if err != nil {
			t.Fatal(err)
		}
		_ = cl.BeginTransaction() // slot 0 is in its pre-committed one already
	}
	if err := n.append(6); err != nil {
		t.Fatal(err)
	}
	err = n.drain(0)
	src := n.sources[0]
	var at []int64
	for _, p := range src.order {
		at = append(at, p.next)
	}
	if err == nil {
		t.Fatalf("the drain returned no error although the sink refused its records; the source's positions %v are past them: a checkpoint now loses them", at)
	}
	t.Logf("the drain failed: %v", err)
}
