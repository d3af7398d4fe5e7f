package ha

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/checkpoint"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func newCounter(t *testing.T, cfg Config, l *Leadership) *EtcdCounter {
	t.Helper()
	c, err := NewEtcdCounter(cfg, "job-1", l.Fence())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEtcdCounterConcurrentNextStrictlyIncreasing(t *testing.T) {
	te := startEtcd(t)
	cfg := testConfig(t, te.client())
	// Six goroutines retry one compare-and-swap against each other: on a
	// loaded machine one Next can take several rounds of fsyncs. The test
	// is about order, not latency.
	cfg.RequestTimeout = time.Minute
	l := elect(t, newElector(t, cfg), "jm-a")
	// Goroutines 0-2 share a counter; 3-5 have one each (its own cache),
	// as separate code paths of one leader would.
	shared := newCounter(t, cfg, l)
	const goroutines, perG = 6, 30
	ids := make([][]int64, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		c := shared
		if g >= 3 {
			c = newCounter(t, cfg, l)
		}
		wg.Go(func() {
			for range perG {
				id, err := c.Next(bg(t))
				if err != nil {
					errs[g] = err
					return
				}
				ids[g] = append(ids[g], id)
			}
		})
	}
	wg.Wait()
	var all []int64
	for g := range goroutines {
		if errs[g] != nil {
			t.Fatalf("goroutine %d: %v", g, errs[g])
		}
		for i := 1; i < len(ids[g]); i++ {
			if ids[g][i] <= ids[g][i-1] {
				t.Fatalf("goroutine %d got %d after %d", g, ids[g][i], ids[g][i-1])
			}
		}
		all = append(all, ids[g]...)
	}
	slices.Sort(all)
	for i, id := range all { // each of 1..n exactly once: no reuse, no gap
		if id != int64(i+1) {
			t.Fatalf("IDs handed out: %v", all)
		}
	}
	if last, err := shared.Last(bg(t)); err != nil || last != goroutines*perG {
		t.Fatalf("last %d %v", last, err)
	}
}

func TestEtcdCounterAcrossLeaderChange(t *testing.T) {
	te := startEtcd(t)
	cfgA, cfgB := testConfig(t, te.client()), testConfig(t, te.client())
	la := elect(t, newElector(t, cfgA), "jm-a")
	ca := newCounter(t, cfgA, la)
	for want := int64(1); want <= 3; want++ {
		if got, err := ca.Next(bg(t)); err != nil || got != want {
			t.Fatalf("A next: %d %v, want %d", got, err, want)
		}
	}
	// Restored from checkpoint 10: continue at 11; a lower value is no-op.
	if err := ca.SetIfHigher(bg(t), 10); err != nil {
		t.Fatal(err)
	}
	if err := ca.SetIfHigher(bg(t), 5); err != nil {
		t.Fatal(err)
	}
	if got, err := ca.Next(bg(t)); err != nil || got != 11 {
		t.Fatalf("A next after SetIfHigher(10): %d %v", got, err)
	}

	pendingB := campaignAsync(bg(t), newElector(t, cfgB), "jm-b")
	waitCandidates(t, cfgA.Client, cfgA.mustKeys(t).Leader(), 2)
	assertPending(t, pendingB)
	if err := la.Resign(bg(t)); err != nil {
		t.Fatal(err)
	}
	lb := awaitLeadership(t, pendingB)
	cb := newCounter(t, cfgB, lb) // a fresh JobManager process
	for want := int64(12); want <= 14; want++ {
		if got, err := cb.Next(bg(t)); err != nil || got != want {
			t.Fatalf("B next: %d %v, want %d", got, err, want)
		}
	}
	_, err := ca.Next(bg(t))
	mustNotLeader(t, "A next after resign", err)

	// A job reaching a terminal state drops its counter.
	if err := cb.Shutdown(bg(t), false); err != nil {
		t.Fatal(err)
	}
	if last, err := cb.Last(bg(t)); err != nil || last != 14 {
		t.Fatalf("after shutdown without discard: %d %v", last, err)
	}
	if err := cb.Shutdown(bg(t), true); err != nil {
		t.Fatal(err)
	}
	if last, err := cb.Last(bg(t)); err != nil || last != 0 {
		t.Fatalf("after shutdown with discard: %d %v", last, err)
	}
}

func TestFencingRejectsDeposedLeader(t *testing.T) {
	te := startEtcd(t)
	admin := te.client()
	cfgA, cfgB := testConfig(t, te.client()), testConfig(t, te.client())
	cfgA.SessionTTL = 60 * time.Second // A would not notice on its own for a minute
	la := elect(t, newElector(t, cfgA), "jm-a")

	ca := newCounter(t, cfgA, la)
	sa, err := NewEtcdStore(cfgA, "job-1", 2, la.Fence())
	if err != nil {
		t.Fatal(err)
	}
	ja, err := NewEtcdJobStore(cfgA, la.Fence())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Next(bg(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Add(bg(t), checkpoint.Completed{ID: 1, MetadataPath: "s3://b/1/_metadata", Dir: "s3://b/1"}); err != nil {
		t.Fatal(err)
	}
	if err := ja.Put(bg(t), "job-1", []byte("graph-1")); err != nil {
		t.Fatal(err)
	}

	// A is deposed behind its back (its lease expires: here, revoked by
	// someone else) and B takes over, while A's process keeps running.
	pendingB := campaignAsync(bg(t), newElector(t, cfgB), "jm-b")
	waitCandidates(t, admin, cfgA.mustKeys(t).Leader(), 2)
	if _, err := admin.Revoke(bg(t), la.sess.Lease()); err != nil {
		t.Fatal(err)
	}
	lb := awaitLeadership(t, pendingB)

	// Every write A still attempts fails, as one fenced txn each.
	_, err = ca.Next(bg(t))
	mustNotLeader(t, "A counter next", err)
	mustNotLeader(t, "A counter set", ca.SetIfHigher(bg(t), 100))
	mustNotLeader(t, "A counter shutdown", ca.Shutdown(bg(t), true))
	_, err = sa.Add(bg(t), checkpoint.Completed{ID: 2, MetadataPath: "s3://b/2/_metadata"})
	mustNotLeader(t, "A store add", err)
	_, err = sa.Add(bg(t), checkpoint.Completed{ID: 3, MetadataPath: "s3://b/3/_metadata"})
	mustNotLeader(t, "A store add", err)
	_, err = sa.Add(bg(t), checkpoint.Completed{ID: 4, MetadataPath: "s3://b/4/_metadata"})
	mustNotLeader(t, "A store add subsuming", err)
	_, err = sa.Shutdown(bg(t), true)
	mustNotLeader(t, "A store shutdown", err)
	mustNotLeader(t, "A job put", ja.Put(bg(t), "job-2", []byte("graph-2")))
	mustNotLeader(t, "A job put over", ja.Put(bg(t), "job-1", []byte("graph-1-by-a")))
	mustNotLeader(t, "A job status put", ja.PutStatus(bg(t), "job-1", []byte(`{"restarts":1}`)))
	mustNotLeader(t, "A job delete", ja.Delete(bg(t), "job-1"))
	awaitClosed(t, la.Done(), "A.Done")
	mustNotLeader(t, "A.Err", la.Err())

	// Nothing A tried is visible: B sees exactly what A wrote as leader.
	cb := newCounter(t, cfgB, lb)
	if id, err := cb.Next(bg(t)); err != nil || id != 2 {
		t.Fatalf("B next: %d %v, want 2", id, err)
	}
	sb, err := NewEtcdStore(cfgB, "job-1", 2, lb.Fence())
	if err != nil {
		t.Fatal(err)
	}
	if all, err := sb.All(bg(t)); err != nil || len(all) != 1 || all[0].ID != 1 {
		t.Fatalf("store after A's attempts: %v %v", all, err)
	}
	jb, err := NewEtcdJobStore(cfgB, lb.Fence())
	if err != nil {
		t.Fatal(err)
	}
	if list, err := jb.List(bg(t)); err != nil || len(list) != 1 || list[0].ID != "job-1" || string(list[0].Graph) != "graph-1" {
		t.Fatalf("jobs after A's attempts: %v %v", list, err)
	}
	resp, err := admin.Get(bg(t), cfgA.mustKeys(t).Root(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	want := []string{
		"/weir/test/checkpoints/job-1/completed/00000000000000000001",
		"/weir/test/checkpoints/job-1/counter",
		"/weir/test/jobs/job-1",
		lb.Fence().Key,
	}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("keys:\n%v\nwant\n%v", keys, want)
	}
	// A reader with no fence can read but not write.
	ro, err := NewEtcdJobStore(cfgB, Fence{})
	if err != nil {
		t.Fatal(err)
	}
	mustNotLeader(t, "unfenced put", ro.Put(bg(t), "job-3", nil))
}
