package auth

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

func enforcer(t *testing.T, logs *strings.Builder) *Enforcer {
	t.Helper()
	tokens, err := Parse([]byte("read " + readToken + "\nadmin " + adminToken + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return NewEnforcer(tokens, slog.New(slog.NewTextHandler(logs, nil)), prometheus.NewRegistry())
}

func TestHTTP(t *testing.T) {
	var logs strings.Builder
	e := enforcer(t, &logs)
	srv := httptest.NewServer(e.HTTP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("served"))
	})))
	defer srv.Close()
	for _, tc := range []struct {
		method, token string
		want          int
	}{
		{http.MethodGet, "", http.StatusUnauthorized},
		{http.MethodGet, "not-a-token-0123456789", http.StatusUnauthorized},
		{http.MethodGet, readToken, http.StatusOK},
		{http.MethodPatch, readToken, http.StatusForbidden},
		{http.MethodPost, readToken, http.StatusForbidden},
		{http.MethodPost, adminToken, http.StatusOK},
		{http.MethodGet, adminToken, http.StatusOK},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+"/jobs/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Errors []string }
		if resp.StatusCode != http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Errors) != 1 {
				t.Errorf("%s with %q: body %v, %v; want Flink's error body", tc.method, tc.token, body, err)
			}
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s with %q: %s, want %d", tc.method, tc.token, resp.Status, tc.want)
		}
		if tc.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s with %q: 401 without WWW-Authenticate", tc.method, tc.token)
		}
	}
	if n := testutil.ToFloat64(e.refused.WithLabelValues("rest", "unauthenticated")); n != 2 {
		t.Errorf("unauthenticated REST refusals counted %v, want 2", n)
	}
	if n := testutil.ToFloat64(e.refused.WithLabelValues("rest", "forbidden")); n != 2 {
		t.Errorf("forbidden REST refusals counted %v, want 2", n)
	}
	if strings.Contains(logs.String(), readToken) || strings.Contains(logs.String(), "not-a-token") {
		t.Errorf("a token is in the logs:\n%s", logs.String())
	}
}

// jobs is a client API that lists no jobs and cancels any.
type jobs struct {
	weirv1grpc.UnimplementedClientServiceServer
}

func (jobs) ListJobs(context.Context, *weirv1.ListJobsRequest) (*weirv1.ListJobsResponse, error) {
	return &weirv1.ListJobsResponse{}, nil
}

func (jobs) CancelJob(context.Context, *weirv1.CancelJobRequest) (*weirv1.CancelJobResponse, error) {
	return &weirv1.CancelJobResponse{}, nil
}

func TestGRPC(t *testing.T) {
	var logs strings.Builder
	e := enforcer(t, &logs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(e.UnaryInterceptor()))
	weirv1grpc.RegisterClientServiceServer(s, jobs{})
	go func() { _ = s.Serve(lis) }()
	defer s.Stop()
	client := func(token string) weirv1grpc.ClientServiceClient {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(Credentials{Token: token}))
		}
		conn, err := grpc.NewClient(lis.Addr().String(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return weirv1grpc.NewClientServiceClient(conn)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		token      string
		list, canc codes.Code
	}{
		{"", codes.Unauthenticated, codes.Unauthenticated},
		{"not-a-token-0123456789", codes.Unauthenticated, codes.Unauthenticated},
		{readToken, codes.OK, codes.PermissionDenied},
		{adminToken, codes.OK, codes.OK},
	} {
		c := client(tc.token)
		_, err := c.ListJobs(ctx, &weirv1.ListJobsRequest{})
		if got := status.Code(err); got != tc.list {
			t.Errorf("ListJobs with %q: %v, want %v", tc.token, err, tc.list)
		}
		_, err = c.CancelJob(ctx, &weirv1.CancelJobRequest{JobId: "x"})
		if got := status.Code(err); got != tc.canc {
			t.Errorf("CancelJob with %q: %v, want %v", tc.token, err, tc.canc)
		}
	}
	if strings.Contains(logs.String(), readToken) || strings.Contains(logs.String(), adminToken) {
		t.Errorf("a token is in the logs:\n%s", logs.String())
	}
}

func TestGRPCRole(t *testing.T) {
	for m, want := range map[string]Role{
		"/weir.v1.ClientService/ListJobs":                       Read,
		"/weir.v1.ClientService/GetCheckpoint":                  Read,
		"/weir.v1.ClientService/SubmitJob":                      Admin,
		"/weir.v1.ClientService/DisposeSavepoint":               Admin,
		"/weir.v1.ClientService/RescaleJob":                     Admin,
		"/weir.v1.JobManagerGatewayService/Heartbeat":           None,
		"/weir.v1.DataExchangeService/Subscribe":                None,
		"/grpc.health.v1.Health/Check":                          None,
		"/weir.v1.TaskExecutorService/NotifyCheckpointComplete": None,
	} {
		if got := GRPCRole(m); got != want {
			t.Errorf("GRPCRole(%s) = %v, want %v", m, got, want)
		}
	}
}
