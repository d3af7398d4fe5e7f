package jobmanager

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
		{true, false, codes.Unavailable, codes.OK},
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
