package ha

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/checkpoint"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestKeysLayout(t *testing.T) {
	k, err := NewKeys("prod")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ got, want string }{
		{k.Root(), "/weir/prod/"},
		{k.Leader(), "/weir/prod/leader"},
		{k.Jobs(), "/weir/prod/jobs/"},
		{k.Job("j1"), "/weir/prod/jobs/j1"},
		{k.Checkpoints("j1"), "/weir/prod/checkpoints/j1/"},
		{k.Counter("j1"), "/weir/prod/checkpoints/j1/counter"},
		{k.Completed("j1"), "/weir/prod/checkpoints/j1/completed/"},
		{k.CompletedCheckpoint("j1", 42), "/weir/prod/checkpoints/j1/completed/00000000000000000042"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for _, bad := range []string{"", "a/b", "a b", "..", "a\n"} {
		if _, err := NewKeys(bad); err == nil {
			t.Errorf("cluster ID %q accepted", bad)
		}
	}
	if err := (Config{ClusterID: "x"}).Validate(); err == nil {
		t.Error("config without client accepted")
	}
}

func TestObserveFollowsLeaderChanges(t *testing.T) {
	te := startEtcd(t)
	cfg := testConfig(t, te.client())
	a, b := newElector(t, cfg), newElector(t, cfg)

	// A follower (or a TaskManager) with a client of its own.
	fc := te.client()
	prefix := cfg.mustKeys(t).Leader()
	ctx, cancel := context.WithCancel(context.Background())
	obs := Observe(ctx, fc, prefix)
	next := func(want string) {
		t.Helper()
		select {
		case info, ok := <-obs:
			if !ok {
				t.Fatal("observation closed")
			}
			if info.ID != want {
				t.Fatalf("observed leader %+v, want %q", info, want)
			}
			cur, found, err := CurrentLeader(bg(t), fc, prefix)
			if err != nil || found != (want != "") || cur.ID != want {
				t.Fatalf("current leader %+v %v %v, want %q", cur, found, err, want)
			}
			if want != "" && (cur.RPCAddr != want+":6123" || cur.HTTPAddr != want+":8081") {
				t.Fatalf("leader info %+v", cur)
			}
		case <-time.After(waitFor):
			t.Fatalf("no observation of %q", want)
		}
	}

	next("") // nobody leads yet
	la := elect(t, a, "jm-a")
	next("jm-a")
	pendingB := campaignAsync(bg(t), b, "jm-b")
	// B's candidate key appearing must not change the observed leader.
	waitCandidates(t, fc, prefix, 2)
	assertPending(t, pendingB)
	if err := la.Resign(bg(t)); err != nil {
		t.Fatal(err)
	}
	awaitClosed(t, la.Done(), "A.Done after resign")
	lb := awaitLeadership(t, pendingB)
	next("jm-b")
	if got, _, err := b.CurrentLeader(bg(t)); err != nil || got.ID != "jm-b" {
		t.Fatalf("elector's current leader %+v %v", got, err)
	}
	if err := lb.Resign(bg(t)); err != nil {
		t.Fatal(err)
	}
	next("")

	cancel()
	for range obs { // closes once the goroutine is done
	}
}

// waitCandidates waits until n candidate keys exist, by watching.
func waitCandidates(t *testing.T, c *clientv3.Client, prefix string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for {
		resp, err := c.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if int(resp.Count) == n {
			return
		}
		wch := c.Watch(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		if _, ok := <-wch; !ok {
			t.Fatalf("waiting for %d candidates: %v", n, ctx.Err())
		}
	}
}

func (c Config) mustKeys(t *testing.T) Keys {
	t.Helper()
	k, err := NewKeys(c.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestLeadershipLost(t *testing.T) {
	t.Run("client closed", func(t *testing.T) {
		te := startEtcd(t)
		cfgA := testConfig(t, te.client())
		cfgA.SessionTTL = 2 * time.Second // B takes over when A's lease expires
		la := elect(t, newElector(t, cfgA), "jm-a")
		pendingB := campaignAsync(bg(t), newElector(t, testConfig(t, te.client())), "jm-b")

		_ = cfgA.Client.Close() // A's process loses etcd
		awaitClosed(t, la.Done(), "A.Done after client close")
		if err := la.Err(); !errors.Is(err, ErrNotLeader) || !errors.Is(err, errSessionLost) {
			t.Fatalf("A.Err = %v", err)
		}
		lb := awaitLeadership(t, pendingB) // once A's lease expires
		if lb.Fence().Rev <= la.Fence().Rev {
			t.Fatalf("B's fence %+v not after A's %+v", lb.Fence(), la.Fence())
		}
	})
	t.Run("lease revoked", func(t *testing.T) {
		te := startEtcd(t)
		cfg := testConfig(t, te.client())
		cfg.SessionTTL = 60 * time.Second // only the revoke can end it
		la := elect(t, newElector(t, cfg), "jm-a")
		if _, err := te.client().Revoke(bg(t), la.sess.Lease()); err != nil {
			t.Fatal(err)
		}
		awaitClosed(t, la.Done(), "A.Done after lease revoke")
		mustNotLeader(t, "A.Err", la.Err())
	})
	t.Run("leader key deleted", func(t *testing.T) {
		te := startEtcd(t)
		cfg := testConfig(t, te.client())
		cfg.SessionTTL = 60 * time.Second
		la := elect(t, newElector(t, cfg), "jm-a")
		if _, err := te.client().Delete(bg(t), la.Fence().Key); err != nil {
			t.Fatal(err)
		}
		awaitClosed(t, la.Done(), "A.Done after key delete")
		if err := la.Err(); !errors.Is(err, ErrNotLeader) || !errors.Is(err, errKeyDeleted) {
			t.Fatalf("A.Err = %v", err)
		}
		if err := la.Resign(bg(t)); err != nil { // after loss: releases the lease
			t.Fatal(err)
		}
	})
	t.Run("resign", func(t *testing.T) {
		te := startEtcd(t)
		cfg := testConfig(t, te.client())
		la := elect(t, newElector(t, cfg), "jm-a")
		if la.Err() != nil {
			t.Fatalf("Err while leading: %v", la.Err())
		}
		if err := la.Resign(bg(t)); err != nil {
			t.Fatal(err)
		}
		awaitClosed(t, la.Done(), "A.Done after resign")
		if err := la.Err(); !errors.Is(err, ErrNotLeader) || !errors.Is(err, errResigned) {
			t.Fatalf("A.Err = %v", err)
		}
		if err := la.Resign(bg(t)); err != nil {
			t.Fatalf("second resign: %v", err)
		}
		resp, err := cfg.Client.Get(bg(t), la.Fence().Key)
		if err != nil || len(resp.Kvs) != 0 {
			t.Fatalf("leader key after resign: %v %v", resp.Kvs, err)
		}
	})
}

func TestCampaignCancelledLeavesNoCandidate(t *testing.T) {
	te := startEtcd(t)
	cfg := testConfig(t, te.client())
	la := elect(t, newElector(t, cfg), "jm-a")
	eb := newElector(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	pendingB := campaignAsync(ctx, eb, "jm-b")
	waitCandidates(t, cfg.Client, cfg.mustKeys(t).Leader(), 2)
	cancel()
	select {
	case r := <-pendingB:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled campaign: %+v", r)
		}
		t.Logf("cancelled campaign: %v", r.err)
	case <-time.After(waitFor):
		t.Fatal("cancelled campaign still running")
	}
	eb.Close() // waits for the revoke of B's lease
	waitCandidates(t, cfg.Client, cfg.mustKeys(t).Leader(), 1)
	if cur, _, err := CurrentLeader(bg(t), cfg.Client, cfg.mustKeys(t).Leader()); err != nil || cur.ID != "jm-a" {
		t.Fatalf("leader %+v %v", cur, err)
	}
	select {
	case <-la.Done():
		t.Fatalf("A lost leadership: %v", la.Err())
	default:
	}
}

func TestEtcdStoppedFailsWithinDeadline(t *testing.T) {
	te := startEtcd(t)
	cfg := testConfig(t, te.client())
	cfg.SessionTTL = 2 * time.Second
	cfg.RequestTimeout = time.Second // bounds the revoke after the loss
	la := elect(t, newElector(t, cfg), "jm-a")
	counter, err := NewEtcdCounter(cfg, "job-1", la.Fence())
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewEtcdStore(cfg, "job-1", 2, la.Fence())
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := NewEtcdJobStore(cfg, la.Fence())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := counter.Next(bg(t)); err != nil {
		t.Fatal(err)
	}
	eb := newElector(t, testConfig(t, te.client()))

	te.stop()
	select {
	case <-te.e.Server.StopNotify():
	case <-time.After(waitFor):
		t.Fatal("etcd did not stop")
	}

	const deadline = 300 * time.Millisecond
	ops := []struct {
		name string
		f    func(context.Context) error
	}{
		{"counter next", func(ctx context.Context) error { _, err := counter.Next(ctx); return err }},
		{"counter set", func(ctx context.Context) error { return counter.SetIfHigher(ctx, 100) }},
		{"counter last", func(ctx context.Context) error { _, err := counter.Last(ctx); return err }},
		{"store add", func(ctx context.Context) error {
			_, err := store.Add(ctx, checkpoint.Completed{ID: 2, MetadataPath: "m"})
			return err
		}},
		{"store latest", func(ctx context.Context) error { _, _, err := store.Latest(ctx); return err }},
		{"store all", func(ctx context.Context) error { _, err := store.All(ctx); return err }},
		{"store recover", func(ctx context.Context) error { _, err := store.Recover(ctx, nil); return err }},
		{"store shutdown", func(ctx context.Context) error { _, err := store.Shutdown(ctx, true); return err }},
		{"jobs put", func(ctx context.Context) error { return jobs.Put(ctx, "job-1", []byte("g")) }},
		{"jobs list", func(ctx context.Context) error { _, err := jobs.List(ctx); return err }},
		{"jobs delete", func(ctx context.Context) error { return jobs.Delete(ctx, "job-1") }},
		{"current leader", func(ctx context.Context) error { _, _, err := eb.CurrentLeader(ctx); return err }},
		{"campaign", func(ctx context.Context) error { _, err := eb.Campaign(ctx, LeaderInfo{ID: "jm-b"}); return err }},
	}
	for _, op := range ops {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		err := op.f(ctx)
		took := time.Since(start)
		cancel()
		if err == nil {
			t.Errorf("%s: no error with etcd stopped", op.name)
			continue
		}
		if took > deadline+2*time.Second {
			t.Errorf("%s: took %v with a %v deadline", op.name, took, deadline)
		}
		if !strings.HasPrefix(err.Error(), "ha: ") {
			t.Errorf("%s: error without context: %v", op.name, err)
		}
		t.Logf("%s (%v): %v", op.name, took.Round(time.Millisecond), err)
	}

	// Without a caller deadline, RequestTimeout bounds the call.
	short := cfg
	short.RequestTimeout = deadline
	c2, err := NewEtcdCounter(short, "job-1", la.Fence())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c2.Next(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("next without deadline: %v", err)
	}
	if took := time.Since(start); took > deadline+2*time.Second {
		t.Errorf("next without deadline took %v", took)
	}

	// The leader steps down once its lease can no longer be kept alive.
	awaitClosed(t, la.Done(), "A.Done with etcd stopped")
	if err := la.Err(); !errors.Is(err, ErrNotLeader) || !errors.Is(err, errSessionLost) {
		t.Fatalf("A.Err = %v", err)
	}
	t.Logf("A.Err: %v", la.Err())
}
