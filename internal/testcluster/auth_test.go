package testcluster_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirproject/weir/internal/auth"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/testcluster"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

const (
	readToken  = "read-token-0123456789"
	adminToken = "admin-token-0123456789"
)

// TestTokens: with a token file the client API and the REST API refuse
// requests without a token (401, Unauthenticated) and with a role too low
// (403, PermissionDenied); health, metrics and the dashboard's files stay
// open; the refusals are counted.
func TestTokens(t *testing.T) {
	tokens, err := auth.Parse([]byte("read " + readToken + "\nadmin " + adminToken + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := testcluster.Start(t, testcluster.Options{Tokens: tokens, ClientToken: adminToken})
	c.StartTaskManager("tm-1", 2, nil)

	// gRPC: the admin submits, a reader lists but may not cancel, a client
	// without a token may do nothing.
	cfg, err := structpb.NewStruct(map[string]any{"count": 0, "keys": 4, "rate": 100})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: &weirv1.JobGraph{
		Name:          "tokens",
		Checkpointing: &weirv1.CheckpointConfig{Interval: durationpb.New(time.Hour)},
		Vertices:      []*weirv1.JobVertex{{Name: "source", Operator: "sequence-source", Parallelism: 1, Config: cfg}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	job := r.GetJobId()
	client := func(token string) weirv1grpc.ClientServiceClient {
		var opts []grpc.DialOption
		if token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(auth.Credentials{Token: token}))
		}
		conn, err := rpc.Dial(c.RPCAddr, rpc.Credentials(nil, nil), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return weirv1grpc.NewClientServiceClient(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		token        string
		list, cancel codes.Code
	}{
		{"", codes.Unauthenticated, codes.Unauthenticated},
		{"wrong-token-0123456789", codes.Unauthenticated, codes.Unauthenticated},
		{readToken, codes.OK, codes.PermissionDenied},
	} {
		cl := client(tc.token)
		if _, err := cl.ListJobs(ctx, &weirv1.ListJobsRequest{}); status.Code(err) != tc.list {
			t.Errorf("ListJobs with %q: %v, want %v", tc.token, err, tc.list)
		}
		if _, err := cl.CancelJob(ctx, &weirv1.CancelJobRequest{JobId: job}); status.Code(err) != tc.cancel {
			t.Errorf("CancelJob with %q: %v, want %v", tc.token, err, tc.cancel)
		}
	}

	// REST.
	do := func(method, path, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+c.HTTPAddr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/jobs/overview", "", http.StatusUnauthorized},
		{"GET", "/v1/jobs/" + job, "wrong-token-0123456789", http.StatusUnauthorized},
		{"GET", "/jobs/" + job, readToken, http.StatusOK},
		{"POST", "/jobs/" + job + "/checkpoints", readToken, http.StatusForbidden},
		{"PATCH", "/jobs/" + job + "?mode=cancel", readToken, http.StatusForbidden},
		{"GET", "/healthz", "", http.StatusOK},
		{"GET", "/metrics", "", http.StatusOK},
		{"GET", "/", "", http.StatusOK},
		{"GET", "/api.js", "", http.StatusOK},
		{"PATCH", "/jobs/" + job + "?mode=cancel", adminToken, http.StatusAccepted},
	} {
		if got, body := do(tc.method, tc.path, tc.token); got != tc.want {
			t.Errorf("%s %s with %q: %d %s, want %d", tc.method, tc.path, tc.token, got, body, tc.want)
		}
	}
	_, metrics := do("GET", "/metrics", "")
	for _, want := range []string{
		`weir_auth_refused_total{api="grpc",reason="unauthenticated"} 4`,
		`weir_auth_refused_total{api="grpc",reason="forbidden"} 1`,
		`weir_auth_refused_total{api="rest",reason="unauthenticated"} 2`,
		`weir_auth_refused_total{api="rest",reason="forbidden"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, tok := range []string{readToken, adminToken} {
		if strings.Contains(metrics, tok) {
			t.Errorf("/metrics shows a token")
		}
	}
}
