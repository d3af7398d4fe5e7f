package jobmanager_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestClaimsRefuseASecondJob: an exactly-once Kafka sink claims its
// transactional-id prefix while its job has not ended (internal/connector's
// claims, which the JobManager checks without knowing Kafka): a second
// job with the same prefix is refused, naming the prefix and the job that
// holds it; once that job ended, the prefix is free again.
func TestClaimsRefuseASecondJob(t *testing.T) {
	c := startInProcess(t) // no TaskManager: the first job waits for slots, not ended
	job := func(name, prefix string) *weirv1.JobGraph { return kafkaSinkJob(c, name, prefix) }
	first, err := c.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: job("first", "orders")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: job("second", "orders")})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a second job with the first's transactional-id-prefix: %v, want it refused", err)
	}
	for _, want := range []string{`transactional-id-prefix "orders"`, first.GetJobId(), "abort each other's transactions"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the refusal %q does not say %q", err, want)
		}
	}
	if _, err := c.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: job("other", "payments")}); err != nil {
		t.Fatalf("a job with another prefix: %v", err)
	}
	if _, err := c.Client.CancelJob(context.Background(), &weirv1.CancelJobRequest{JobId: first.GetJobId()}); err != nil {
		t.Fatal(err)
	}
	c.wait(first.GetJobId(), "cancelled", inState(weirv1.JobState_JOB_STATE_CANCELED))
	if _, err := c.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: job("third", "orders")}); err != nil {
		t.Fatalf("the prefix of a cancelled job: %v", err)
	}
}

// TestClaimsConcurrentSubmits: jobs claiming one prefix submitted at the
// same moment: exactly one is accepted.
func TestClaimsConcurrentSubmits(t *testing.T) {
	c := startInProcess(t)
	g := func(name string) *weirv1.JobGraph { return kafkaSinkJob(c, name, "shared") }
	const n = 8
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		go func() {
			<-start
			_, err := c.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g(fmt.Sprintf("job-%d", i))})
			errs <- err
		}()
	}
	close(start)
	accepted := 0
	for range n {
		if err := <-errs; err == nil {
			accepted++
		} else if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("a refusal other than the claim's: %v", err)
		}
	}
	if accepted != 1 {
		t.Fatalf("%d of %d jobs claiming one transactional-id prefix were accepted, want 1", accepted, n)
	}
}

// kafkaSinkJob is a job whose exactly-once Kafka sink claims the
// transactional-id prefix given (its broker is never reached: the job
// waits for slots).
func kafkaSinkJob(c *inProcess, name, prefix string) *weirv1.JobGraph {
	return &weirv1.JobGraph{
		Name:          name,
		Checkpointing: &weirv1.CheckpointConfig{Interval: durationpb.New(time.Second), Timeout: durationpb.New(time.Minute)},
		Vertices: []*weirv1.JobVertex{
			{Name: "src", Operator: "sequence-source", Parallelism: 1, Config: c.config(map[string]any{"count": 10})},
			{Name: "out", Operator: "kafka-sink", Parallelism: 1,
				Inputs: []*weirv1.JobEdge{{Source: "src", Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD}},
				Config: c.config(map[string]any{"bootstrap-servers": "127.0.0.1:1", "topic": "t", "transactional-id-prefix": prefix})},
		},
	}
}
