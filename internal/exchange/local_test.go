package exchange_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/exchange"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// A local channel's notify fires when its subpartition turns non-empty, not
// for every buffer, and at once when data was already queued on attach.
func TestLocalChannelNotify(t *testing.T) {
	ctx := t.Context()
	sub := exchange.NewSubpartition(8, 0)
	n := newNotifier()
	ch := exchange.NewLocalChannel(sub, n.notify)
	defer ch.Close()
	if got := n.count(); got != 0 {
		t.Fatalf("notify called %d times on an empty channel", got)
	}
	if b, ok, err := ch.Poll(); ok || err != nil {
		t.Fatalf("poll of empty channel: %s %v %v", describe(b), ok, err)
	}

	add := func(i int) {
		t.Helper()
		if _, err := sub.Add(ctx, numbered(i)); err != nil {
			t.Fatal(err)
		}
	}
	add(0) // empty → non-empty
	if got := n.count(); got != 1 {
		t.Fatalf("notify called %d times after the first buffer, want 1", got)
	}
	add(1)
	add(2)
	if got := n.count(); got != 1 {
		t.Fatalf("notify called %d times for a non-empty channel, want 1", got)
	}
	for i := range 3 {
		b, ok, err := ch.Poll()
		if !ok || err != nil || number(t, b) != i {
			t.Fatalf("poll %d: %s %v %v", i, describe(b), ok, err)
		}
	}
	if _, ok, _ := ch.Poll(); ok {
		t.Fatal("drained channel returned a buffer")
	}
	add(3) // empty → non-empty again
	if got := n.count(); got != 2 {
		t.Fatalf("notify called %d times, want 2", got)
	}

	// Attaching to a subpartition that already holds data notifies at once.
	sub2 := exchange.NewSubpartition(8, 0)
	if _, err := sub2.Add(ctx, numbered(9)); err != nil {
		t.Fatal(err)
	}
	n2 := newNotifier()
	ch2 := exchange.NewLocalChannel(sub2, n2.notify)
	if got := n2.count(); got != 1 {
		t.Fatalf("attaching to a non-empty subpartition notified %d times, want 1", got)
	}
	// A closed channel is not notified any more.
	ch2.Close()
	if b, _, _ := sub2.Poll(); number(t, b) != 9 {
		t.Fatal("lost buffer 9")
	}
	if _, err := sub2.Add(ctx, numbered(10)); err != nil {
		t.Fatal(err)
	}
	if got := n2.count(); got != 1 {
		t.Fatalf("closed channel notified, %d calls", got)
	}
}

// Lookup waits for a partition registered after it was asked for.
func TestRegistryLookupWaitsForRegister(t *testing.T) {
	reg := exchange.NewRegistry()
	id := partitionID("late")
	wctx := newWaitCtx(t.Context())
	type result struct {
		p   *exchange.ResultPartition
		err error
	}
	res := make(chan result, 1)
	go func() {
		p, err := reg.Lookup(wctx, id)
		res <- result{p, err}
	}()
	await(t, wctx.waiting, "Lookup to wait")

	// Another partition registering wakes Lookup, which keeps waiting.
	reg.Register(exchange.NewResultPartition(partitionID("other"), 1, 1, 0))
	part := exchange.NewResultPartition(id, 2, 1, 0)
	reg.Register(part)
	select {
	case r := <-res:
		if r.err != nil || r.p != part {
			t.Fatalf("Lookup: %p %v, want %p", r.p, r.err, part)
		}
	case <-time.After(long):
		t.Fatal("Lookup did not see the registered partition")
	}

	// Registered partitions are found at once; an equal ID is the same key.
	p, err := reg.Lookup(t.Context(), partitionID("late"))
	if err != nil || p != part {
		t.Fatalf("second Lookup: %p %v", p, err)
	}
}

// Lookup of a partition that never registers fails when its context ends.
func TestRegistryLookupTimesOut(t *testing.T) {
	reg := exchange.NewRegistry()
	reg.Register(exchange.NewResultPartition(partitionID("present"), 1, 1, 0))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	p, err := reg.Lookup(ctx, partitionID("absent"))
	if p != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lookup: %v %v, want deadline exceeded", p, err)
	}
}

// A producer blocked on a full subpartition is failed with ErrReleased when
// the partition is released, and so is every later write.
func TestReleaseFailsBlockedProducer(t *testing.T) {
	ctx := t.Context()
	reg := exchange.NewRegistry()
	id := partitionID("released")
	part := exchange.NewResultPartition(id, 2, 1, 0)
	reg.Register(part)
	if _, err := part.Subs[0].Add(ctx, numbered(0)); err != nil {
		t.Fatal(err)
	}

	wctx := newWaitCtx(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := part.Subs[0].Add(wctx, numbered(1))
		res <- err
	}()
	await(t, wctx.waiting, "Add to block on the full subpartition")
	reg.Release(id)
	select {
	case err := <-res:
		if !errors.Is(err, exchange.ErrReleased) {
			t.Fatalf("blocked Add returned %v, want ErrReleased", err)
		}
	case <-time.After(long):
		t.Fatal("blocked Add did not return after Release")
	}

	for i, sub := range part.Subs {
		if _, err := sub.Add(ctx, numbered(2)); !errors.Is(err, exchange.ErrReleased) {
			t.Fatalf("Add to released subpartition %d: %v", i, err)
		}
		if _, _, ok := sub.Poll(); ok {
			t.Fatalf("released subpartition %d still holds data", i)
		}
	}
	// A released partition is gone from the registry.
	lctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := reg.Lookup(lctx, id); err == nil {
		t.Fatal("released partition still registered")
	}
}

// A RecordWriter blocked writing into a released partition reports
// ErrReleased too.
func TestReleaseFailsBlockedRecordWriter(t *testing.T) {
	id := partitionID("writer-released")
	part := exchange.NewResultPartition(id, 1, 1, 0)
	wctx := newWaitCtx(t.Context())
	w := exchange.NewRecordWriter(wctx, part, weirv1.Partitioner_PARTITIONER_FORWARD, 128, 0, 1)
	if err := w.Emit(records("x", 1)[0]); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- w.Emit(records("y", 1)[0]) }()
	await(t, wctx.waiting, "Emit to block")
	part.Release()
	select {
	case err := <-res:
		if !errors.Is(err, exchange.ErrReleased) {
			t.Fatalf("Emit returned %v, want ErrReleased", err)
		}
	case <-time.After(long):
		t.Fatal("Emit did not return after Release")
	}
	if w.Backpressured <= 0 {
		t.Fatalf("Backpressured = %v after a blocked write", w.Backpressured)
	}
}

// Forget drops a finished partition from the registry but its consumers keep
// reading what is queued, and its producer is not failed.
func TestRegistryForgetKeepsData(t *testing.T) {
	ctx := t.Context()
	reg := exchange.NewRegistry()
	id := partitionID("forgotten")
	part := exchange.NewResultPartition(id, 1, 2, 0)
	reg.Register(part)
	if _, err := part.Subs[0].Add(ctx, numbered(1)); err != nil {
		t.Fatal(err)
	}
	reg.Forget(id)
	if _, err := part.Subs[0].Add(ctx, numbered(2)); err != nil {
		t.Fatalf("Add after Forget: %v", err)
	}
	for want := 1; want <= 2; want++ {
		b, _, ok := part.Subs[0].Poll()
		if !ok || number(t, b) != want {
			t.Fatalf("poll %d: ok=%v", want, ok)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := reg.Lookup(lctx, id); err == nil {
		t.Fatal("forgotten partition still registered")
	}
}
