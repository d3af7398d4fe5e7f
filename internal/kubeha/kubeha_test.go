package kubeha

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/weirproject/weir/internal/checkpoint"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// cut is a fault switch in a client's transport: while set, every request
// fails as if the API server could not be reached.
type cut struct {
	on   atomic.Bool
	next http.RoundTripper
}

func (c *cut) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.on.Load() {
		return nil, errors.New("partitioned from the API server (test)")
	}
	return c.next.RoundTrip(r)
}

// config is a Config for a cluster of its own in a namespace of its own,
// with a client whose connection the test can cut.
func config(t *testing.T, s *kubetest.APIServer, ns string) (Config, *cut) {
	t.Helper()
	rc := rest.CopyConfig(s.Config)
	c := &cut{}
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { c.next = rt; return c }
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Client: client, Namespace: ns, ClusterID: "test", LeaseDuration: 3 * time.Second, RequestTimeout: 2 * time.Second}, c
}

func campaign(t *testing.T, e *Elector, id string, within time.Duration) *Leadership {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	l, err := e.Campaign(ctx, ha.LeaderInfo{ID: id, RPCAddr: id + ":6123"})
	if err != nil {
		t.Fatalf("campaign %s: %v", id, err)
	}
	return l
}

func newElector(t *testing.T, cfg Config) *Elector {
	t.Helper()
	e, err := NewElector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func TestConfigValidate(t *testing.T) {
	s := kubetest.Shared(t)
	for _, c := range []Config{
		{Namespace: "ns", ClusterID: "a"},
		{Client: s.Client, Namespace: "", ClusterID: "a"},
		{Client: s.Client, Namespace: "ns", ClusterID: "Has_Upper"},
		{Client: s.Client, Namespace: "ns", ClusterID: "a", LeaseDuration: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: want an error", c)
		}
	}
	if got := NewNames("c").Job("Job_1"); len(got) > 63 || got == "weir-c-job-Job_1" {
		t.Errorf("a job ID that is no DNS label must be hashed, got %q", got)
	}
}

func TestElectionHandsOverOnResignAndOnCrash(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	cfgA, _ := config(t, s, ns)
	cfgB, _ := config(t, s, ns)
	a, b := newElector(t, cfgA), newElector(t, cfgB)

	la := campaign(t, a, "jm-a", 10*time.Second)
	info, ok, err := CurrentLeader(context.Background(), cfgB)
	if err != nil || !ok || info.ID != "jm-a" || info.RPCAddr != "jm-a:6123" {
		t.Fatalf("current leader = %+v %v %v, want jm-a", info, ok, err)
	}
	observed := Observe(t.Context(), cfgB)
	if got := <-observed; got.ID != "jm-a" {
		t.Fatalf("observed %+v, want jm-a", got)
	}

	// B waits while A leads; A resigns and B takes over at once.
	won := make(chan *Leadership, 1)
	go func() {
		l, err := b.Campaign(t.Context(), ha.LeaderInfo{ID: "jm-b"})
		if err == nil {
			won <- l
		}
	}()
	select {
	case <-won:
		t.Fatal("B was elected while A leads")
	case <-time.After(4 * time.Second): // longer than the lease: A renews
	}
	start := time.Now()
	if err := la.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(la.Err(), ha.ErrNotLeader) {
		t.Fatalf("A's leadership after resigning: %v", la.Err())
	}
	var lb *Leadership
	select {
	case lb = <-won:
	case <-time.After(5 * time.Second):
		t.Fatal("B not elected after A resigned")
	}
	t.Logf("takeover after resign: %v", time.Since(start))
	if lb.Fence().Term <= la.Fence().Term {
		t.Fatalf("B's term %d is not above A's %d", lb.Fence().Term, la.Fence().Term)
	}
	waitObserved(t, observed, "jm-b")

	// B crashes (its elector closes without releasing the Lease): A takes
	// over once the Lease expired.
	b.Close()
	start = time.Now()
	la2 := campaign(t, a, "jm-a", 15*time.Second)
	took := time.Since(start)
	if took < 2*time.Second {
		t.Fatalf("A took over a crashed leader's lease after %v, before it expired", took)
	}
	t.Logf("takeover after crash: %v (lease 3s)", took)
	if la2.Fence().Term <= lb.Fence().Term {
		t.Fatalf("term did not rise: %d after %d", la2.Fence().Term, lb.Fence().Term)
	}
}

func waitObserved(t *testing.T, ch <-chan ha.LeaderInfo, id string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-ch:
			if got.ID == id {
				return
			}
		case <-timeout:
			t.Fatalf("never observed %s", id)
		}
	}
}

// A leader cut off from the API server steps down before its Lease
// expires, and a standby takes over after it; the old leader's writes are
// refused once the new one has claimed the objects.
func TestPartitionedLeaderStepsDownAndIsFenced(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	cfgA, cutA := config(t, s, ns)
	cfgB, _ := config(t, s, ns)
	a, b := newElector(t, cfgA), newElector(t, cfgB)
	la := campaign(t, a, "jm-a", 10*time.Second)

	storeA, err := NewCheckpoints(cfgA, "job1", 2, la.Fence())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if id, err := storeA.Next(ctx); err != nil || id != 1 {
		t.Fatalf("next = %d %v", id, err)
	}
	if _, err := storeA.Add(ctx, checkpoint.Completed{ID: 1, MetadataPath: "/cp/chk-1/_metadata"}); err != nil {
		t.Fatal(err)
	}

	cutA.on.Store(true)
	cutAt := time.Now()
	select {
	case <-la.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("partitioned leader did not step down")
	}
	lb := campaign(t, b, "jm-b", 15*time.Second)
	if time.Since(cutAt) < 3*time.Second {
		t.Fatal("B took over before A's lease expired")
	}

	// B claims the job's objects, then A (reconnected, still running
	// with its old fence) can write nothing.
	storeB, err := NewCheckpoints(cfgB, "job1", 2, lb.Fence())
	if err != nil {
		t.Fatal(err)
	}
	kept, _, err := storeB.RecoverReport(ctx, nil)
	if err != nil || len(kept) != 1 || kept[0].ID != 1 {
		t.Fatalf("recover = %+v %v", kept, err)
	}
	cutA.on.Store(false)
	if _, err := storeA.Next(ctx); !errors.Is(err, ha.ErrNotLeader) {
		t.Fatalf("deposed leader's next ID: %v, want ErrNotLeader", err)
	}
	if _, err := storeA.Add(ctx, checkpoint.Completed{ID: 2, MetadataPath: "/cp/chk-2/_metadata"}); !errors.Is(err, ha.ErrNotLeader) {
		t.Fatalf("deposed leader's add: %v, want ErrNotLeader", err)
	}
	if id, err := storeB.Next(ctx); err != nil || id != 2 {
		t.Fatalf("new leader's next = %d %v, want 2", id, err)
	}

	// A deposed leader that creates an object after the takeover (a job
	// submitted to it) has it deleted again and fails.
	jobsA, _ := NewJobStore(cfgA, la.Fence())
	if err := jobsA.Put(ctx, "late-job", []byte("graph")); !errors.Is(err, ha.ErrNotLeader) {
		t.Fatalf("deposed leader's new job: %v, want ErrNotLeader", err)
	}
	if _, err := cfgB.Client.CoreV1().ConfigMaps(ns).Get(ctx, NewNames("test").Job("late-job"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the deposed leader's job configmap stayed: %v", err)
	}
}

// A paused leader (it cannot renew) finds on waking that its term is over.
func TestPausedLeaderLosesOnWaking(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	cfgA, _ := config(t, s, ns)
	cfgB, _ := config(t, s, ns)
	a, b := newElector(t, cfgA), newElector(t, cfgB)
	la := campaign(t, a, "jm-a", 10*time.Second)
	// A pause, as SIGSTOP makes it: nothing of A runs, so its renewals
	// stop; here its monitor's clock is moved back instead.
	la.mu.Lock()
	la.mu.renewed = time.Now().Add(-time.Hour)
	la.mu.Unlock()
	select {
	case <-la.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a leader whose last renewal is past the deadline did not step down")
	}
	if !errors.Is(la.Err(), errRenewFailed) {
		t.Fatalf("reason %v", la.Err())
	}
	campaign(t, b, "jm-b", 15*time.Second)
}

func TestCheckpointsAndJobStore(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	cfg, _ := config(t, s, ns)
	l := campaign(t, newElector(t, cfg), "jm", 10*time.Second)
	ctx := context.Background()

	cps, err := NewCheckpoints(cfg, "Job_With.Odd-ID", 2, l.Fence())
	if err != nil {
		t.Fatal(err)
	}
	if err := cps.SetIfHigher(ctx, 41); err != nil {
		t.Fatal(err)
	}
	if id, err := cps.Next(ctx); err != nil || id != 42 {
		t.Fatalf("next = %d %v, want 42", id, err)
	}
	if err := cps.SetIfHigher(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if last, err := cps.Last(ctx); err != nil || last != 42 {
		t.Fatalf("last = %d %v, want 42 (never lowered)", last, err)
	}
	var subsumed []checkpoint.Completed
	for id := int64(40); id <= 42; id++ {
		sub, err := cps.Add(ctx, checkpoint.Completed{ID: id, MetadataPath: "/cp/" + string(rune('a'+id-40))})
		if err != nil {
			t.Fatal(err)
		}
		subsumed = append(subsumed, sub...)
	}
	if len(subsumed) != 1 || subsumed[0].ID != 40 {
		t.Fatalf("subsumed %+v, want checkpoint 40", subsumed)
	}
	if _, err := cps.Add(ctx, checkpoint.Completed{ID: 39, MetadataPath: "/x"}); err == nil {
		t.Fatal("an older checkpoint was added")
	}
	all, err := cps.All(ctx)
	if err != nil || len(all) != 2 || all[0].ID != 41 || all[1].ID != 42 {
		t.Fatalf("all = %+v %v", all, err)
	}
	// A corrupt entry is skipped on recovery, reported, not fatal.
	cm, _ := cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, cps.Name(), metav1.GetOptions{})
	cm.Data[checkpointName(43)] = "{not json"
	if _, err := cfg.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	reader, _ := NewCheckpoints(cfg, "Job_With.Odd-ID", 2, Fence{})
	kept, skipped, err := reader.RecoverReport(ctx, nil)
	if err != nil || len(kept) != 2 || len(skipped) != 1 || skipped[0].ID != 43 {
		t.Fatalf("recover = %+v skipped %+v %v", kept, skipped, err)
	}
	if _, err := reader.Next(ctx); !errors.Is(err, ha.ErrNotLeader) {
		t.Fatalf("a reader's write: %v, want ErrNotLeader", err)
	}
	removed, err := cps.Shutdown(ctx, true)
	if err != nil || len(removed) != 3 {
		t.Fatalf("shutdown = %+v %v", removed, err)
	}
	if _, err := cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, cps.Name(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("configmap after a discarding shutdown: %v", err)
	}

	jobs, _ := NewJobStore(cfg, l.Fence())
	if err := jobs.PutStatus(ctx, "j1", []byte(`{}`)); err == nil {
		t.Fatal("status of a job not stored was accepted")
	}
	if err := jobs.Put(ctx, "j1", []byte{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.PutStatus(ctx, "j1", []byte(`{"restarts":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Put(ctx, "j2", []byte{9}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Put(ctx, "big", make([]byte, 2<<20)); err == nil {
		t.Fatal("a graph larger than a ConfigMap was accepted")
	}
	got, err := jobs.List(ctx)
	if err != nil || len(got) != 2 || got[0].ID != "j1" || string(got[0].Status) != `{"restarts":3}` || len(got[0].Graph) != 3 || got[1].Status != nil {
		t.Fatalf("list = %+v %v", got, err)
	}
	if err := jobs.Delete(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Delete(ctx, "j1"); err != nil {
		t.Fatalf("deleting an absent job: %v", err)
	}
	if got, _ := jobs.List(ctx); len(got) != 1 {
		t.Fatalf("after delete: %+v", got)
	}
}

// A Lease deleted by hand starts again above every term the cluster's
// objects carry, so the new leader is not refused by its own objects.
func TestDeletedLeaseKeepsTermsRising(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	cfg, _ := config(t, s, ns)
	e := newElector(t, cfg)
	ctx := context.Background()
	var last int64
	for range 3 {
		l := campaign(t, e, "jm", 10*time.Second)
		jobs, _ := NewJobStore(cfg, l.Fence())
		if err := jobs.Put(ctx, "j", []byte{1}); err != nil {
			t.Fatal(err)
		}
		if l.Fence().Term <= last {
			t.Fatalf("term %d after %d", l.Fence().Term, last)
		}
		last = l.Fence().Term
		if err := l.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Client.CoordinationV1().Leases(ns).Delete(ctx, NewNames("test").Lease(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// The safety of the Lease: a leader cut off from the API server steps
// down before any standby, campaigning all along, can take over.
func TestStandbyTakesOverOnlyAfterTheLeaderSteppedDown(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	cfgA, cutA := config(t, s, ns)
	cfgB, _ := config(t, s, ns)
	a, b := newElector(t, cfgA), newElector(t, cfgB)
	for round := range 3 {
		la := campaign(t, a, "jm-a", 10*time.Second)
		won := make(chan *Leadership, 1)
		go func() {
			if l, err := b.Campaign(t.Context(), ha.LeaderInfo{ID: "jm-b"}); err == nil {
				won <- l
			}
		}()
		// Cut at a different place in the renewal period each round.
		time.Sleep(time.Duration(1500+round*333) * time.Millisecond)
		cutA.on.Store(true)
		cutAt := time.Now()
		var lb *Leadership
		select {
		case lb = <-won:
		case <-time.After(10 * time.Second):
			t.Fatal("B never took over")
		}
		took := time.Since(cutAt)
		select {
		case <-la.Done():
		default:
			t.Fatalf("round %d: B took over %v after the cut while A still believed it led", round, took)
		}
		t.Logf("round %d: B took over %v after A was cut off (lease 3s)", round, took)
		if took < 2*time.Second-100*time.Millisecond {
			t.Errorf("round %d: B took over %v after the cut, before A's last renewal could have expired", round, took)
		}
		cutA.on.Store(false)
		if err := lb.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// A Lease deleted while its leader leads, before that leader wrote any
// object: the new Lease's term is still above the deposed leader's (its
// election recorded it), so the fenced writes of the two exclude each
// other; and the deposed leader steps down at its next renewal.
func TestLeaseDeletedMidTermGivesANewTerm(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	cfgA, _ := config(t, s, ns)
	cfgB, _ := config(t, s, ns)
	a, b := newElector(t, cfgA), newElector(t, cfgB)
	la := campaign(t, a, "jm-a", 10*time.Second)
	ctx := context.Background()
	if err := cfgB.Client.CoordinationV1().Leases(ns).Delete(ctx, NewNames("test").Lease(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lb := campaign(t, b, "jm-b", 10*time.Second)
	if lb.Fence().Term <= la.Fence().Term {
		t.Fatalf("the new Lease's leader has term %d, the deposed one %d", lb.Fence().Term, la.Fence().Term)
	}
	select {
	case <-la.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the deposed leader did not step down")
	}
	// Of two leaderships that took one term, only the first to record it
	// leads.
	if err := b.recordTerm(ctx, Fence{Holder: "other", Term: lb.Fence().Term}); !errors.Is(err, errTermTaken) {
		t.Fatalf("a second record of term %d: %v, want errTermTaken", lb.Fence().Term, err)
	}
	if err := b.recordTerm(ctx, Fence{Holder: "later", Term: lb.Fence().Term + 1}); err != nil {
		t.Fatalf("a later term: %v", err)
	}
}
