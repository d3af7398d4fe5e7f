package jobmanager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/certs"
	"github.com/weirproject/weir/internal/scheduler"
	"github.com/weirproject/weir/internal/tlsconfig"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// callerWith is a context of a call whose verified client certificate
// names cn, as gRPC's TLS credentials leave it.
func callerWith(cn string) context.Context {
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{
		State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}},
	}})
}

// With mutual TLS a TaskManager reports only for the attempts deployed to
// it: another certificate's ack, decline or state report is refused and
// counted; an attempt the job does not run goes on to the coordinator,
// which drops it.
func TestCheckSender(t *testing.T) {
	dir := t.TempDir()
	if _, err := certs.Init(dir, []string{"jobmanager"}, false); err != nil {
		t.Fatal(err)
	}
	r, err := tlsconfig.New(tlsconfig.Files{
		Cert: filepath.Join(dir, "jobmanager.pem"), Key: filepath.Join(dir, "jobmanager-key.pem"), CA: filepath.Join(dir, certs.CAFile),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{TLS: r}, log: slog.New(slog.DiscardHandler),
		foreignReports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "foreign"}, []string{"report"})}
	mine := &weirv1.ExecutionAttemptID{JobId: "j", Vertex: "sum", SubtaskIndex: 1, Attempt: 2, Session: "s1"}
	j := &jobMaster{}
	j.view.Store(&jobView{
		View: scheduler.View{Execs: []scheduler.Exec{{Attempt: mine, TaskManager: "tm-1"}}},
		tms:  map[string]*taskManager{"tm-1": {id: "tm-1", identity: "taskmanager-1"}},
	})
	gone := &weirv1.ExecutionAttemptID{JobId: "j", Vertex: "sum", SubtaskIndex: 1, Attempt: 1, Session: "s1"}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		a      *weirv1.ExecutionAttemptID
		refuse bool
	}{
		{"its TaskManager", callerWith("taskmanager-1"), mine, false},
		{"another certificate", callerWith("taskmanager-2"), mine, true},
		{"no certificate", context.Background(), mine, true},
		{"an attempt the job does not run", callerWith("taskmanager-2"), gone, false},
	} {
		err := s.checkSender(tc.ctx, j, tc.a, "ack")
		if got := status.Code(err) == codes.PermissionDenied; got != tc.refuse {
			t.Errorf("%s: %v, want refused %v", tc.name, err, tc.refuse)
		}
	}
	if n := testutil.ToFloat64(s.foreignReports.WithLabelValues("ack")); n != 2 {
		t.Errorf("foreign acks counted %v, want 2", n)
	}

	// Without mutual TLS callers cannot be told apart: nothing is checked.
	s.cfg.TLS = nil
	if err := s.checkSender(callerWith("taskmanager-2"), j, mine, "ack"); err != nil {
		t.Errorf("without TLS: %v", err)
	}
}
