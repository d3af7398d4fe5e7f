package jobmanager

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	_ "github.com/weirproject/weir/internal/connector/builtin" // the Kafka sink's claims
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestClientRefusedWhileRecovering: a new leader refuses the client API
// until it has recovered every stored job (a submit would not see the
// claims of a job not recovered yet), while TaskManagers may register.
func TestClientRefusedWhileRecovering(t *testing.T) {
	s := &Server{}
	call := func(method string) codes.Code {
		_, err := s.leaderOnly(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method},
			func(context.Context, any) (any, error) { return nil, nil })
		return status.Code(err)
	}
	const (
		submit   = "/weir.v1.ClientService/SubmitJob"
		register = "/weir.v1.JobManagerGatewayService/RegisterTaskManager"
	)
	for _, step := range []struct {
		leading, recovered bool
		submit, register   codes.Code
	}{
		{false, false, codes.Unavailable, codes.Unavailable},
		// TaskManagers register once the jobs are known: their reports
		// are adopted by the jobs or cancelled.
		{true, false, codes.Unavailable, codes.Unavailable},
		{true, true, codes.OK, codes.OK},
	} {
		s.leading.Store(step.leading)
		s.recovered.Store(step.recovered)
		if got := call(submit); got != step.submit {
			t.Errorf("leading %t, recovered %t: a submit got %s, want %s", step.leading, step.recovered, got, step.submit)
		}
		if got := call(register); got != step.register {
			t.Errorf("leading %t, recovered %t: a registration got %s, want %s", step.leading, step.recovered, got, step.register)
		}
	}
}

// TestClaimsOfUnrecoveredJobs: a stored job the leader could not recover
// keeps its claims: a submit that claims the same is refused, naming it.
func TestClaimsOfUnrecoveredJobs(t *testing.T) {
	sink := func(prefix string) *weirv1.JobGraph {
		cfg, err := structpb.NewStruct(map[string]any{"bootstrap-servers": "127.0.0.1:1", "topic": "t", "transactional-id-prefix": prefix})
		if err != nil {
			t.Fatal(err)
		}
		return &weirv1.JobGraph{Name: "j", Vertices: []*weirv1.JobVertex{{Name: "out", Operator: "kafka-sink", Parallelism: 1, Config: cfg}}}
	}
	s := &Server{}
	// job-b's graph did not decode: nothing is known of its claims.
	s.mu.unrecovered = map[string]*weirv1.JobGraph{"job-a": sink("orders"), "job-b": nil}
	err := s.checkClaims(sink("orders"))
	if err == nil || !strings.Contains(err.Error(), "job-a") || !strings.Contains(err.Error(), "could not recover") {
		t.Fatalf("a submit claiming an unrecovered job's prefix: %v, want it refused naming job-a", err)
	}
	if err := s.checkClaims(sink("payments")); err != nil {
		t.Fatalf("another prefix: %v", err)
	}
}

// TestUnrecoveredJobIsNotNotFound: a stored job the leader could not
// recover is answered Unavailable, not NotFound, and its ID is not
// submitted again: a client that took it for gone would run it twice
// once a later leader recovers it.
func TestUnrecoveredJobIsNotNotFound(t *testing.T) {
	s := &Server{}
	const id = "0123456789abcdef0123456789abcdef"
	s.mu.unrecovered = map[string]*weirv1.JobGraph{id: nil}
	if _, err := s.lookup(id); status.Code(err) != codes.Unavailable {
		t.Fatalf("lookup of an unrecovered job: %v, want Unavailable", err)
	}
	if _, err := s.lookup("fedcba9876543210fedcba9876543210"); status.Code(err) != codes.NotFound {
		t.Fatalf("lookup of an unknown job: %v, want NotFound", err)
	}
	g := &weirv1.JobGraph{Name: "j", Vertices: []*weirv1.JobVertex{{Name: "src", Operator: "sequence-source", Parallelism: 1}}}
	if _, err := s.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g, JobId: id}); status.Code(err) != codes.Unavailable {
		t.Fatalf("a submission under an unrecovered job's ID: %v, want Unavailable", err)
	}
}
