package ha

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// waitFor bounds every wait of these tests on an event.
const waitFor = 20 * time.Second

// testEtcd is a single-member etcd in the test process, on loopback.
type testEtcd struct {
	t        *testing.T
	e        *embed.Etcd
	endpoint string
	stop     func() // stops etcd; idempotent
}

// startEtcd starts an etcd that the test's cleanup stops.
func startEtcd(t *testing.T) *testEtcd {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "weir-test"
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "panic"
	lo := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{lo}
	cfg.AdvertiseClientUrls = []url.URL{lo}
	cfg.ListenPeerUrls = []url.URL{lo}
	cfg.AdvertisePeerUrls = []url.URL{lo}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	te := &testEtcd{t: t, e: e}
	te.stop = sync.OnceFunc(e.Close)
	t.Cleanup(te.stop)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd failed: %v", err)
	case <-time.After(waitFor):
		t.Fatal("etcd not ready")
	}
	te.endpoint = e.Clients[0].Addr().String()
	return te
}

// client returns a new client that the test's cleanup closes.
func (te *testEtcd) client() *clientv3.Client {
	te.t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{te.endpoint},
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		te.t.Fatalf("etcd client: %v", err)
	}
	te.t.Cleanup(func() { _ = c.Close() })
	return c
}

// testConfig is the configuration of cluster "test" through c.
func testConfig(t *testing.T, c *clientv3.Client) Config {
	return Config{
		Client:         c,
		ClusterID:      "test",
		SessionTTL:     5 * time.Second,
		RequestTimeout: 5 * time.Second,
		Logger:         slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// newElector returns an elector that the test's cleanup closes.
func newElector(t *testing.T, cfg Config) *Elector {
	t.Helper()
	e, err := NewElector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

type campaignResult struct {
	l   *Leadership
	err error
}

// campaignAsync campaigns in the background; the result arrives on the
// channel.
func campaignAsync(ctx context.Context, e *Elector, id string) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		l, err := e.Campaign(ctx, LeaderInfo{ID: id, RPCAddr: id + ":6123", HTTPAddr: id + ":8081"})
		ch <- campaignResult{l, err}
	}()
	return ch
}

// elect campaigns and waits for the leadership.
func elect(t *testing.T, e *Elector, id string) *Leadership {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	return awaitLeadership(t, campaignAsync(ctx, e, id))
}

func awaitLeadership(t *testing.T, ch <-chan campaignResult) *Leadership {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("campaign: %v", r.err)
		}
		return r.l
	case <-time.After(waitFor):
		t.Fatal("campaign did not finish")
	}
	return nil
}

// assertPending checks that a campaign has not finished (it is queued
// behind a leader): the election key exists but is not the first.
func assertPending(t *testing.T, ch <-chan campaignResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("campaign finished while another leads: %+v", r)
	default:
	}
}

// awaitClosed waits for ch to close.
func awaitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitFor):
		t.Fatalf("%s: not closed within %v", what, waitFor)
	}
}

func mustNotLeader(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("%s: got %v, want an error wrapping ErrNotLeader", what, err)
	}
	t.Logf("%s: %v", what, err)
}

// bg is a context for a single call of a test.
func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}
