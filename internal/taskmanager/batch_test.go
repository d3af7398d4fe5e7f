package taskmanager

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// A checkpoint request names one subtask, or every subtask of the
// checkpoint on this TaskManager: those running here get the call, the
// others come back as unknown; a single unknown subtask is NotFound.
func TestEachSubtaskOfARequest(t *testing.T) {
	attempt := func(v string, i int32) *weirv1.ExecutionAttemptID {
		return &weirv1.ExecutionAttemptID{JobId: "j", Vertex: v, SubtaskIndex: i, Attempt: 0, Session: "s"}
	}
	s := &Server{}
	s.mu.tasks = map[string]*running{}
	here := []*weirv1.ExecutionAttemptID{attempt("src", 0), attempt("sink", 0), attempt("sink", 1)}
	for _, a := range here {
		s.mu.tasks[a.Key()] = &running{subtask: a.Key()}
	}
	gone := attempt("src", 1)

	for _, tc := range []struct {
		name        string
		one         *weirv1.ExecutionAttemptID
		batch       []*weirv1.ExecutionAttemptID
		wantCalled  []string
		wantUnknown []string
		wantCode    codes.Code
	}{
		{name: "one", one: here[0], wantCalled: []string{here[0].Key()}},
		{name: "one unknown", one: gone, wantCode: codes.NotFound},
		{name: "batch", batch: here, wantCalled: []string{here[0].Key(), here[1].Key(), here[2].Key()}},
		{name: "batch with one gone", batch: []*weirv1.ExecutionAttemptID{here[1], gone, here[2]},
			wantCalled: []string{here[1].Key(), here[2].Key()}, wantUnknown: []string{gone.Key()}},
		{name: "batch of one gone", batch: []*weirv1.ExecutionAttemptID{gone}, wantCode: codes.NotFound},
		{name: "one and batch", one: here[0], batch: here[1:2], wantCalled: []string{here[0].Key(), here[1].Key()}},
		{name: "nothing", wantCode: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var called []string
			unknown, err := s.each(tc.one, tc.batch, func(r *running) { called = append(called, r.subtask) })
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("code %s (%v), want %s", got, err, tc.wantCode)
			}
			var unknownKeys []string
			for _, a := range unknown {
				unknownKeys = append(unknownKeys, a.Key())
			}
			if !slices.Equal(called, tc.wantCalled) || !slices.Equal(unknownKeys, tc.wantUnknown) {
				t.Fatalf("called %v, unknown %v; want %v, %v", called, unknownKeys, tc.wantCalled, tc.wantUnknown)
			}
		})
	}
}
