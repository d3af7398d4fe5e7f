package taskmanager

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/poll"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// call is one gateway call the test's JobManager received: the subtask
// indexes of its acks, answered through reply.
type call struct {
	method string
	acks   []int32
	reply  chan []string // an error message per ack, "" for taken
}

// ackGatewayServer is a JobManager gateway on loopback whose ack calls wait
// for the test's answer.
type ackGatewayServer struct {
	weirv1grpc.UnimplementedJobManagerGatewayServiceServer
	calls   chan call
	batches bool // AcknowledgeCheckpoints is implemented
}

func (s *ackGatewayServer) receive(method string, acks []*weirv1.AcknowledgeCheckpointRequest) []string {
	c := call{method: method, reply: make(chan []string, 1)}
	for _, a := range acks {
		c.acks = append(c.acks, a.GetAttempt().GetSubtaskIndex())
	}
	s.calls <- c
	return <-c.reply
}

func (s *ackGatewayServer) AcknowledgeCheckpoint(_ context.Context, req *weirv1.AcknowledgeCheckpointRequest) (*weirv1.AcknowledgeCheckpointResponse, error) {
	if msg := s.receive("one", []*weirv1.AcknowledgeCheckpointRequest{req})[0]; msg != "" {
		return nil, fmt.Errorf("%s", msg)
	}
	return &weirv1.AcknowledgeCheckpointResponse{}, nil
}

func (s *ackGatewayServer) AcknowledgeCheckpoints(ctx context.Context, req *weirv1.AcknowledgeCheckpointsRequest) (*weirv1.AcknowledgeCheckpointsResponse, error) {
	if !s.batches {
		return s.UnimplementedJobManagerGatewayServiceServer.AcknowledgeCheckpoints(ctx, req)
	}
	return &weirv1.AcknowledgeCheckpointsResponse{Errors: s.receive("many", req.GetAcks())}, nil
}

// startAckGateway serves the gateway and returns an ackSender to it, whose
// acks that wait for a call under way are announced on queued.
func startAckGateway(t *testing.T, batches bool) (srv *ackGatewayServer, a *ackSender, queued <-chan struct{}) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv = &ackGatewayServer{calls: make(chan call, 16), batches: batches}
	g := grpc.NewServer()
	weirv1grpc.RegisterJobManagerGatewayServiceServer(g, srv)
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
	})
	client := weirv1grpc.NewJobManagerGatewayServiceClient(conn)
	q := make(chan struct{}, 16)
	a = &ackSender{gateway: func() (ackGateway, error) { return client, nil }, onQueued: func() { q <- struct{}{} }}
	return srv, a, q
}

func ack(i int32) *weirv1.AcknowledgeCheckpointRequest {
	return &weirv1.AcknowledgeCheckpointRequest{
		Attempt:      &weirv1.ExecutionAttemptID{JobId: "j", Vertex: "v", SubtaskIndex: i, Session: "s"},
		CheckpointId: 7,
	}
}

// acknowledge runs Acknowledge of subtask i on its own goroutine.
func acknowledge(ctx context.Context, a *ackSender, i int32) <-chan error {
	c := make(chan error, 1)
	go func() { c <- a.Acknowledge(ctx, ack(i)) }()
	return c
}

func recv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	return poll.Recv(t, c, 10*time.Second, what)
}

// The first ack goes at once, alone; the acks that come while its call is
// under way go together in the next call, each caller answered with its
// own ack's result.
func TestAcksReadyDuringACallShareTheNext(t *testing.T) {
	srv, a, queued := startAckGateway(t, true)
	ctx := t.Context()

	first := acknowledge(ctx, a, 0)
	c := recv(t, srv.calls, "the first call")
	if c.method != "one" || !slices.Equal(c.acks, []int32{0}) {
		t.Fatalf("first call %s %v, want one [0]", c.method, c.acks)
	}
	later := map[int32]<-chan error{}
	for i := int32(1); i <= 3; i++ {
		later[i] = acknowledge(ctx, a, i)
		recv(t, queued, fmt.Sprintf("ack %d to queue", i))
	}
	c.reply <- []string{""}
	if err := recv(t, first, "the first ack's answer"); err != nil {
		t.Fatal(err)
	}

	c = recv(t, srv.calls, "the second call")
	if got := slices.Sorted(slices.Values(c.acks)); c.method != "many" || !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("second call %s %v, want many of 1, 2 and 3", c.method, c.acks)
	}
	// The JobManager refuses subtask 2's ack alone.
	answers := make([]string, len(c.acks))
	for i, sub := range c.acks {
		if sub == 2 {
			answers[i] = "refused"
		}
	}
	c.reply <- answers
	for i, ch := range later {
		err := recv(t, ch, fmt.Sprintf("ack %d's answer", i))
		if want := i == 2; (err != nil) != want {
			t.Errorf("ack %d: %v, want refused %v", i, err, want)
		}
	}
	select {
	case c := <-srv.calls:
		t.Fatalf("a third call: %s %v", c.method, c.acks)
	default:
	}
}

// A JobManager without AcknowledgeCheckpoints (an older one, during an
// upgrade) gets the acks of a batch one call each; an ack whose subtask
// was cancelled while it waited is not sent.
func TestAcksToAJobManagerWithoutBatches(t *testing.T) {
	srv, a, queued := startAckGateway(t, false)
	ctx := t.Context()

	first := acknowledge(ctx, a, 0)
	c := recv(t, srv.calls, "the first call")
	cancelled, cancel := context.WithCancel(ctx)
	gone := acknowledge(cancelled, a, 9)
	recv(t, queued, "ack 9 to queue")
	later := []<-chan error{acknowledge(ctx, a, 1), acknowledge(ctx, a, 2)}
	recv(t, queued, "ack 1 to queue")
	recv(t, queued, "ack 2 to queue")
	cancel()
	if err := recv(t, gone, "the cancelled ack's answer"); err == nil {
		t.Fatal("a cancelled ack reported taken")
	}
	c.reply <- []string{""}
	recv(t, first, "the first ack's answer")

	var sent []int32
	for range 2 {
		c := recv(t, srv.calls, "a call per ack")
		if c.method != "one" {
			t.Fatalf("%s call to a JobManager without batches", c.method)
		}
		sent = append(sent, c.acks...)
		c.reply <- []string{""}
	}
	if slices.Sort(sent); !slices.Equal(sent, []int32{1, 2}) {
		t.Fatalf("sent %v one by one, want 1 and 2 (not the cancelled 9)", sent)
	}
	for i, ch := range later {
		if err := recv(t, ch, "an answer"); err != nil {
			t.Errorf("ack %d: %v", i+1, err)
		}
	}
}

// Acks whose inline state is large go in several calls, each below the
// gRPC message limit, and every one of them at least alone.
func TestAckBatchesBoundedBySize(t *testing.T) {
	big := func(i int32, mib int) *queuedAck {
		req := ack(i)
		req.State = &weirv1.SubtaskState{OperatorState: &weirv1.StateHandle{InlineData: make([]byte, mib<<20)}}
		return &queuedAck{req: req}
	}
	a := &ackSender{queue: []*queuedAck{big(0, 3), big(1, 3), big(2, 3), big(3, 20), big(4, 1)}}
	var calls [][]int32
	for len(a.queue) > 0 {
		var subs []int32
		for _, q := range a.take() {
			subs = append(subs, q.req.GetAttempt().GetSubtaskIndex())
		}
		calls = append(calls, subs)
	}
	if got, want := fmt.Sprint(calls), "[[0 1] [2] [3] [4]]"; got != want {
		t.Fatalf("calls %s, want %s", got, want)
	}
}
