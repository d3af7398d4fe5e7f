package testcluster_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirproject/weir/internal/certs"
	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/testcluster"
	"github.com/weirproject/weir/internal/tlsconfig"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// TestJobWithMutualTLS runs a running sum whose hash exchange crosses two
// TaskManagers, with every connection on mutual TLS: the client's, the
// TaskManagers' to the JobManager and back, and the data exchange.
func TestJobWithMutualTLS(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{TLS: true})
	c.StartTaskManager("tm-1", 1, nil)
	tm2 := c.StartTaskManager("tm-2", 1, nil)

	const count, keys = 2000, 8
	out := filepath.Join(c.Dir, "out")
	cfg := func(m map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	g := &weirv1.JobGraph{
		Name:          "running-sum-tls",
		Checkpointing: &weirv1.CheckpointConfig{Interval: durationpb.New(100 * time.Millisecond)},
		Vertices: []*weirv1.JobVertex{
			{Name: "source", Operator: "sequence-source", Parallelism: 2, Config: cfg(map[string]any{"count": count, "keys": keys, "rate": 0})},
			{Name: "sum", Operator: "keyed-sum", Parallelism: 2, Inputs: []*weirv1.JobEdge{{Source: "source", Partitioner: weirv1.Partitioner_PARTITIONER_HASH}}},
			{Name: "sink", Operator: "file-sink", Parallelism: 2, Config: cfg(map[string]any{"path": out}),
				Inputs: []*weirv1.JobEdge{{Source: "sum", Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD}}},
		},
	}
	r, err := c.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitJob(r.GetJobId(), "FINISHED", func(j *weirv1.JobInfo) bool { return j.GetState() == weirv1.JobState_JOB_STATE_FINISHED })
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}

	// The HTTP addresses serve HTTPS with the daemons' certificates, to
	// clients without one.
	ca, err := tlsconfig.New(tlsconfig.Files{CA: c.TLSFiles(certs.ClientName).CA}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(nil)}}
	for _, url := range []string{"https://" + c.HTTPAddr + "/overview", "https://" + tm2.HTTPAddr + "/healthz"} {
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", url, resp.Status)
		}
	}
	resp, err := http.Get("http://" + c.HTTPAddr + "/overview")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the JobManager answers plain HTTP")
		}
	}

	// A client without a certificate is refused.
	conn, err := rpc.Dial(c.RPCAddr, rpc.Credentials(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := weirv1grpc.NewClientServiceClient(conn).ListJobs(ctx, &weirv1.ListJobsRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext client: %v, want Unavailable", err)
	}
}

// TestStandbyForwardsRESTOverHTTPS: a standby JobManager forwards REST
// requests to the leader's HTTPS address, trusting the cluster's CA.
func TestStandbyForwardsRESTOverHTTPS(t *testing.T) {
	etcd := testcluster.StartEtcd(t)
	leader := testcluster.Start(t, testcluster.Options{Etcd: etcd, TLS: true})
	leader.WaitLeader()
	standby := testcluster.Start(t, testcluster.Options{Etcd: etcd, TLS: true})
	if standby.CertDir != leader.CertDir {
		t.Fatalf("clusters on one etcd have CAs in %s and %s", leader.CertDir, standby.CertDir)
	}
	ca, err := tlsconfig.New(tlsconfig.Files{CA: standby.TLSFiles(certs.ClientName).CA}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(nil)}}
	poll.UntilNoError(t, 30*time.Second, 20*time.Millisecond, "the standby forwarding /overview", func() (bool, error) {
		resp, err := hc.Get("https://" + standby.HTTPAddr + "/overview")
		if err != nil {
			return false, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// 503 until the standby learnt who leads.
		return resp.StatusCode == http.StatusOK && resp.Header.Get("X-Weir-Leader") != "", nil
	})
}

// TestRegistrationTakeoverRefused: with mutual TLS a caller with another
// valid certificate cannot register under a registered TaskManager's ID
// (which would fail its subtasks and receive its next ones).
func TestRegistrationTakeoverRefused(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{TLS: true})
	c.StartTaskManager("tm-1", 1, nil) // returns once it registered
	other, err := tlsconfig.New(c.TLSFiles(certs.ClientName), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := rpc.Dial(c.RPCAddr, rpc.Credentials(other, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = weirv1grpc.NewJobManagerGatewayServiceClient(conn).RegisterTaskManager(ctx, &weirv1.RegisterTaskManagerRequest{
		TaskmanagerId: "tm-1", RpcAddress: "127.0.0.1:1", Slots: 1,
	})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("registration as tm-1 with the client's certificate: %v, want PermissionDenied", err)
	}
}
