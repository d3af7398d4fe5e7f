package exchange_test

import (
	"errors"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/weirproject/weir/internal/exchange"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// Records and events cross a remote channel in order; end-of-partition ends
// it. The consumer subscribes before the producer registered its partition,
// as happens when a consumer is deployed first, and the queue and credits
// are smaller than the stream, so flow control is exercised on the way.
func TestRemoteChannelDeliversInOrder(t *testing.T) {
	reg := exchange.NewRegistry()
	srv := startServer(t, reg)
	conn := dial(t, srv.addr)
	ctx := t.Context()

	id := partitionID("ordered")
	n := newNotifier()
	ch, err := exchange.NewRemoteChannel(ctx, conn, id, 1, 2, n.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

	want := []exchange.Buffer{
		recordsBuf("a", 3),
		{Kind: exchange.KindBarrier, Barrier: &weirv1.CheckpointBarrier{CheckpointId: 1, TimestampMs: 1234, Options: &weirv1.CheckpointOptions{ExactlyOnce: true}}},
		recordsBuf("b", 1),
		recordsBuf("c", 5),
		{Kind: exchange.KindCancelMarker, CheckpointID: 2},
		recordsBuf("d", 2),
		{Kind: exchange.KindBarrier, Barrier: &weirv1.CheckpointBarrier{CheckpointId: 3}},
		{Kind: exchange.KindEndOfData},
		{Kind: exchange.KindEndOfPartition},
	}
	part := exchange.NewResultPartition(id, 2, 2, 0)
	reg.Register(part)
	produced := make(chan error, 1)
	go func() {
		// The sender releases each batch it sent: it gets copies of want.
		for _, b := range exchange.CloneRecords(slices.Clone(want)) {
			if _, err := part.Subs[1].Add(ctx, b); err != nil {
				produced <- err
				return
			}
		}
		produced <- nil
	}()

	for i, w := range want {
		got := next(t, ch, n)
		if !sameBuffer(got, w) {
			t.Fatalf("buffer %d: got %s, want %s", i, describe(got), describe(w))
		}
	}
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("producer: %v", err)
		}
	case <-time.After(long):
		t.Fatal("producer did not finish")
	}
	// After end-of-partition the channel is drained, not failed.
	for range 3 {
		if b, ok, err := ch.Poll(); ok || err != nil {
			t.Fatalf("poll after end of partition: %s, %v, %v", describe(b), ok, err)
		}
	}
	if _, _, ok := part.Subs[0].Poll(); ok {
		t.Fatal("subpartition 0 received data meant for subpartition 1")
	}
}

// With 2 credits and a subpartition of capacity 2, a producer gets at most
// 4 buffers ahead of a consumer that stops polling; then Add blocks until
// the consumer polls again, and reports how long it was blocked.
func TestRemoteChannelCreditFlowControl(t *testing.T) {
	const (
		capacity = 2
		credits  = 2
		total    = 100
		ahead    = capacity + credits
	)
	reg := exchange.NewRegistry()
	srv := startServer(t, reg)
	conn := dial(t, srv.addr)
	ctx := t.Context()

	id := partitionID("flow")
	part := exchange.NewResultPartition(id, 1, capacity, 0)
	reg.Register(part)
	n := newNotifier()
	ch, err := exchange.NewRemoteChannel(ctx, conn, id, 0, credits, n.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

	type added struct {
		i       int
		blocked time.Duration
		err     error
	}
	var accepted atomic.Int64
	done := make(chan added, total)
	waiting := make(chan int, total) // Add i had to block
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for i := range total {
			wctx := newWaitCtx(ctx)
			go func() {
				select {
				case <-wctx.waiting:
					waiting <- i
				case <-finished:
				}
			}()
			blocked, err := part.Subs[0].Add(wctx, numbered(i))
			if err == nil {
				accepted.Add(1)
			}
			done <- added{i, blocked, err}
			if err != nil {
				return
			}
		}
	}()

	// The consumer does not poll: exactly capacity+credits Adds succeed.
	for want := range ahead {
		select {
		case a := <-done:
			if a.err != nil || a.i != want {
				t.Fatalf("Add %d: %v (want Add %d)", a.i, a.err, want)
			}
		case <-time.After(long):
			t.Fatalf("only %d of the first %d Adds returned without polling", want, ahead)
		}
	}
	// Add number ahead reaches the point where it waits for space...
	for {
		select {
		case i := <-waiting:
			if i < ahead {
				continue // an earlier Add waited for the server to take a buffer
			}
			if i != ahead {
				t.Fatalf("Add %d blocked, want Add %d", i, ahead)
			}
		case <-time.After(long):
			t.Fatalf("Add %d never blocked", ahead)
		}
		break
	}
	// ...and must stay there. Progress here would need the consumer, which
	// is idle, so there is no event to wait for: a short bounded wait that
	// must not see a completion is the only way to assert the absence of
	// progress. A flaky pass is possible only in the direction of missing a
	// bug, never of failing a correct implementation.
	select {
	case a := <-done:
		t.Fatalf("Add %d returned (%v) while the consumer was not polling; %d buffers accepted, at most %d may be", a.i, a.err, accepted.Load(), ahead)
	case <-time.After(200 * time.Millisecond):
	}
	if got := accepted.Load(); got != ahead {
		t.Fatalf("%d buffers accepted, want %d", got, ahead)
	}

	// One poll returns one credit: the server takes one buffer from the
	// subpartition, which lets the blocked Add in.
	if got := number(t, next(t, ch, n)); got != 0 {
		t.Fatalf("first buffer %d, want 0", got)
	}
	select {
	case a := <-done:
		if a.err != nil || a.i != ahead {
			t.Fatalf("Add %d: %v, want Add %d to complete", a.i, a.err, ahead)
		}
		if a.blocked <= 0 {
			t.Fatalf("Add %d was blocked but reported blocked duration %v", a.i, a.blocked)
		}
	case <-time.After(long):
		t.Fatalf("Add %d still blocked after the consumer polled", ahead)
	}

	// Polling resumes progress; the producer never gets more than
	// capacity+credits buffers ahead of what the consumer took.
	for polled := 1; polled < total; polled++ {
		if got := number(t, next(t, ch, n)); got != polled {
			t.Fatalf("buffer %d arrived as number %d", polled, got)
		}
		if a := accepted.Load(); a > int64(polled+1+ahead) {
			t.Fatalf("after %d polls %d buffers accepted, at most %d may be", polled+1, a, polled+1+ahead)
		}
	}
	select {
	case <-finished:
	case <-time.After(long):
		t.Fatal("producer did not finish")
	}
	close(done)
	for a := range done {
		if a.err != nil {
			t.Fatalf("Add %d: %v", a.i, a.err)
		}
	}
	if got := accepted.Load(); got != total {
		t.Fatalf("%d buffers accepted, want %d", got, total)
	}
}

// A remote channel whose server disappears mid-stream fails instead of
// waiting forever; what arrived before the failure is still delivered.
func TestRemoteChannelServerGoesAway(t *testing.T) {
	reg := exchange.NewRegistry()
	srv := startServer(t, reg)
	conn := dial(t, srv.addr)
	ctx := t.Context()

	id := partitionID("vanishing")
	part := exchange.NewResultPartition(id, 1, 4, 0)
	reg.Register(part)
	n := newNotifier()
	ch, err := exchange.NewRemoteChannel(ctx, conn, id, 0, 2, n.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

	for i := range 2 {
		if _, err := part.Subs[0].Add(ctx, numbered(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if got := number(t, next(t, ch, n)); got != i {
			t.Fatalf("got buffer %d, want %d", got, i)
		}
	}

	srv.srv.Stop()

	got, err := nextErr(t, ch, n)
	if len(got) != 0 {
		t.Fatalf("%d unexpected buffers after the server stopped", len(got))
	}
	if err == nil {
		t.Fatal("no error after the server went away")
	}
	t.Logf("channel error: %v", err)
	// The error sticks.
	if _, ok, err2 := ch.Poll(); ok || err2 == nil {
		t.Fatalf("second poll: ok=%v err=%v", ok, err2)
	}
}

// Subscribing to a subpartition the partition does not have fails the channel.
func TestRemoteChannelBadSubpartition(t *testing.T) {
	reg := exchange.NewRegistry()
	srv := startServer(t, reg)
	conn := dial(t, srv.addr)
	ctx := t.Context()

	id := partitionID("narrow")
	reg.Register(exchange.NewResultPartition(id, 1, 1, 0))
	n := newNotifier()
	ch, err := exchange.NewRemoteChannel(ctx, conn, id, 3, 2, n.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := nextErr(t, ch, n); err == nil {
		t.Fatal("subscribing to a missing subpartition did not fail")
	}
}

// Closing a remote channel mid-stream ends its goroutines and the server's
// handler (goleak checks both).
func TestRemoteChannelCloseMidStream(t *testing.T) {
	reg := exchange.NewRegistry()
	srv := startServer(t, reg)
	conn := dial(t, srv.addr)
	ctx := t.Context()

	id := partitionID("closed")
	part := exchange.NewResultPartition(id, 1, 1, 0)
	reg.Register(part)
	n := newNotifier()
	ch, err := exchange.NewRemoteChannel(ctx, conn, id, 0, 1, n.notify)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := part.Subs[0].Add(ctx, numbered(7)); err != nil {
		t.Fatal(err)
	}
	if got := number(t, next(t, ch, n)); got != 7 {
		t.Fatalf("got %d", got)
	}
	ch.Close()
	ch.Close() // idempotent
	if _, ok, err := ch.Poll(); ok || err == nil {
		t.Fatalf("poll after close: ok=%v err=%v, want an error", ok, err)
	}
}

// endsEarly is a producer that closes the stream without end-of-partition.
type endsEarly struct {
	weirv1grpc.UnimplementedDataExchangeServiceServer
}

func (endsEarly) Subscribe(stream weirv1grpc.DataExchangeService_SubscribeServer) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	return stream.Send(numbered(1).ToProto())
}

// A stream that ends cleanly but without end-of-partition is a failure: the
// consumer must not mistake it for a finished producer.
func TestRemoteChannelEndWithoutEndOfPartition(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	weirv1grpc.RegisterDataExchangeServiceServer(s, endsEarly{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(lis)
	}()
	defer func() {
		s.Stop()
		<-served
	}()
	conn := dial(t, lis.Addr().String())
	n := newNotifier()
	ch, err := exchange.NewRemoteChannel(t.Context(), conn, partitionID("early"), 0, 2, n.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	got, err := nextErr(t, ch, n)
	if len(got) != 1 || number(t, got[0]) != 1 {
		t.Fatalf("got %d buffers before the end, want the one sent", len(got))
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("error %v, want unexpected EOF", err)
	}
}
