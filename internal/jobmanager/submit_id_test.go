package jobmanager_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestSubmitWithJobIDIsIdempotent: a submission naming its job ID gets
// that ID, and the same submission again (a client retrying after a lost
// answer) is answered with the job already there instead of a second one;
// another graph under that ID is refused.
func TestSubmitWithJobIDIsIdempotent(t *testing.T) {
	c := startInProcess(t) // no TaskManager: the job waits for slots
	ctx := context.Background()
	const id = "0123456789abcdef0123456789abcdef"
	g := kafkaSinkJob(c, "named", "named-prefix")
	for range 2 {
		resp, err := c.Client.SubmitJob(ctx, &weirv1.SubmitJobRequest{Job: g, JobId: id})
		if err != nil || resp.GetJobId() != id {
			t.Fatalf("submit with ID: %v %v", resp, err)
		}
	}
	jobs, err := c.Client.ListJobs(ctx, &weirv1.ListJobsRequest{})
	if err != nil || len(jobs.GetJobs()) != 1 {
		t.Fatalf("jobs after a retried submission: %d %v", len(jobs.GetJobs()), err)
	}
	// The same ID with another graph is not the job the client meant.
	other := kafkaSinkJob(c, "renamed", "named-prefix")
	if _, err := c.Client.SubmitJob(ctx, &weirv1.SubmitJobRequest{Job: other, JobId: id}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("the ID with another graph: %v, want AlreadyExists", err)
	}
	for _, bad := range []string{"short", "0123456789ABCDEF0123456789ABCDEF", "../../0123456789abcdef0123456789"} {
		if _, err := c.Client.SubmitJob(ctx, &weirv1.SubmitJobRequest{Job: g, JobId: bad}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("job ID %q: %v, want InvalidArgument", bad, err)
		}
	}
}
