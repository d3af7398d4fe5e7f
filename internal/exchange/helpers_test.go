package exchange_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/exchange"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
	"github.com/weirproject/weir/sdk"
)

// long bounds every wait for something that must happen; it only fires when
// the code under test hangs.
const long = 10 * time.Second

func partitionID(vertex string) *weirv1.ResultPartitionID {
	return &weirv1.ResultPartitionID{
		Producer:       &weirv1.ExecutionAttemptID{JobId: "job", Vertex: vertex, SubtaskIndex: 0, Attempt: 1},
		ConsumerVertex: "consumer",
	}
}

// server is a DataExchange server on a loopback port.
type server struct {
	reg  *exchange.Registry
	srv  *grpc.Server
	addr string
}

func startServer(t *testing.T, reg *exchange.Registry) *server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{reg: reg, srv: grpc.NewServer(), addr: lis.Addr().String()}
	weirv1grpc.RegisterDataExchangeServiceServer(s.srv, &exchange.Server{Partitions: reg})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.srv.Serve(lis)
	}()
	t.Cleanup(func() {
		s.srv.Stop()
		<-served
	})
	return s
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// notifier counts notify calls and wakes a waiting consumer.
type notifier struct {
	mu    sync.Mutex
	calls int
	c     chan struct{}
}

func newNotifier() *notifier { return &notifier{c: make(chan struct{}, 1)} }

func (n *notifier) notify() {
	n.mu.Lock()
	n.calls++
	n.mu.Unlock()
	select {
	case n.c <- struct{}{}:
	default:
	}
}

func (n *notifier) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls
}

// next waits for the next buffer of ch, the way a subtask does: poll, and
// when there is nothing, sleep until notified.
func next(t *testing.T, ch exchange.InputChannel, n *notifier) exchange.Buffer {
	t.Helper()
	deadline := time.NewTimer(long)
	defer deadline.Stop()
	for {
		b, ok, err := ch.Poll()
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if ok {
			return b
		}
		select {
		case <-n.c:
		case <-deadline.C:
			t.Fatalf("no buffer within %v", long)
		}
	}
}

// nextErr waits until ch reports an error; buffers before it are returned.
func nextErr(t *testing.T, ch exchange.InputChannel, n *notifier) ([]exchange.Buffer, error) {
	t.Helper()
	deadline := time.NewTimer(long)
	defer deadline.Stop()
	var got []exchange.Buffer
	for {
		b, ok, err := ch.Poll()
		if err != nil {
			return got, err
		}
		if ok {
			got = append(got, b)
			continue
		}
		select {
		case <-n.c:
		case <-deadline.C:
			t.Fatalf("channel neither failed nor delivered within %v (got %d buffers)", long, len(got))
		}
	}
}

// waitCtx reports when a caller first waits on Done. Subpartition.Add and
// Registry.Lookup only select on Done when they have to block, so this is a
// deterministic "the caller is now blocked" signal, no sleeping involved.
type waitCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func newWaitCtx(parent context.Context) *waitCtx {
	return &waitCtx{Context: parent, waiting: make(chan struct{})}
}

func (c *waitCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

func await(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(long):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func records(prefix string, n int) []sdk.Record {
	rs := make([]sdk.Record, n)
	for i := range rs {
		rs[i] = sdk.Record{Key: fmt.Appendf(nil, "%s-k%d", prefix, i), Value: fmt.Appendf(nil, "%s-v%d", prefix, i), Timestamp: int64(1000 + i)}
	}
	return rs
}

func recordsBuf(prefix string, n int) exchange.Buffer {
	return exchange.Buffer{Kind: exchange.KindRecords, Records: records(prefix, n)}
}

func numbered(i int) exchange.Buffer {
	return exchange.Buffer{Kind: exchange.KindRecords, Records: []sdk.Record{{Key: fmt.Appendf(nil, "%d", i), Timestamp: int64(i)}}}
}

func number(t *testing.T, b exchange.Buffer) int {
	t.Helper()
	if b.Kind != exchange.KindRecords || len(b.Records) != 1 {
		t.Fatalf("not a numbered buffer: %s with %d records", b.Kind, len(b.Records))
	}
	return int(b.Records[0].Timestamp)
}

func sameBuffer(a, b exchange.Buffer) bool {
	if a.Kind != b.Kind || a.CheckpointID != b.CheckpointID || len(a.Records) != len(b.Records) {
		return false
	}
	if (a.Barrier == nil) != (b.Barrier == nil) || (a.Barrier != nil && !proto.Equal(a.Barrier, b.Barrier)) {
		return false
	}
	for i := range a.Records {
		x, y := a.Records[i], b.Records[i]
		if !bytes.Equal(x.Key, y.Key) || !bytes.Equal(x.Value, y.Value) || x.Timestamp != y.Timestamp {
			return false
		}
	}
	return true
}

func describe(b exchange.Buffer) string {
	switch b.Kind {
	case exchange.KindRecords:
		keys := make([]string, len(b.Records))
		for i, r := range b.Records {
			keys[i] = string(r.Key)
		}
		return fmt.Sprintf("records%v", keys)
	case exchange.KindBarrier:
		return fmt.Sprintf("barrier(%d)", b.Barrier.GetCheckpointId())
	case exchange.KindCancelMarker:
		return fmt.Sprintf("cancel(%d)", b.CheckpointID)
	}
	return b.Kind.String()
}
