package exchange_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/exchange"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func barrier(id int64) exchange.Buffer {
	return exchange.Buffer{Kind: exchange.KindBarrier, Barrier: &weirv1.CheckpointBarrier{CheckpointId: id}}
}

func numbers(t *testing.T, bufs []exchange.Buffer) []int {
	t.Helper()
	var out []int
	for _, b := range bufs {
		out = append(out, number(t, b))
	}
	return out
}

// A subpartition is available below capacity, takes data up to
// capacity+overdraft, takes events past that, and puts a priority event
// ahead of everything but earlier priority events, reporting the data it
// overtook. Its producer is woken when it falls below capacity and when a
// barrier leaves it.
func TestSubpartitionCapacityOverdraftAndPriority(t *testing.T) {
	ctx := t.Context()
	sub := exchange.NewSubpartition(2, 1)
	var readerWakes, producerWakes atomic.Int32
	sub.SetListener(func() { readerWakes.Add(1) })
	sub.SetAvailabilityListener(func() { producerWakes.Add(1) })

	for i := range 2 {
		if !sub.Available() {
			t.Fatalf("not available with %d buffers queued", i)
		}
		if _, err := sub.Add(ctx, numbered(i)); err != nil {
			t.Fatal(err)
		}
	}
	if sub.Available() {
		t.Fatal("available at capacity")
	}
	// Overdraft: one more data buffer goes in without blocking.
	if blocked, err := sub.Add(ctx, numbered(2)); err != nil || blocked != 0 {
		t.Fatalf("overdraft Add: blocked %v, %v", blocked, err)
	}
	// At the limit an event still goes in, and never blocks.
	if blocked, err := sub.Add(ctx, exchange.Buffer{Kind: exchange.KindCancelMarker, CheckpointID: 4}); err != nil || blocked != 0 {
		t.Fatalf("event at the limit: blocked %v, %v", blocked, err)
	}
	if n, bytes := sub.Queued(); n != 4 || bytes != 3*(1+8) {
		t.Fatalf("queued %d buffers, %d bytes; want 4, 27", n, bytes)
	}
	wakes := readerWakes.Load()
	over, err := sub.AddPriority(barrier(5))
	if err != nil {
		t.Fatal(err)
	}
	if got := numbers(t, over); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("barrier 5 overtook %v, want [0 1 2]", got)
	}
	if readerWakes.Load() != wakes+1 {
		t.Fatal("a priority event into a non-empty queue did not wake the reader")
	}
	over, err = sub.AddPriority(barrier(6))
	if err != nil {
		t.Fatal(err)
	}
	if got := numbers(t, over); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("barrier 6 overtook %v, want [0 1 2]", got)
	}
	// Only the priority events can be taken without a credit, oldest first.
	for _, id := range []int64{5, 6} {
		b, _, ok := sub.PollPriority()
		if !ok || b.Kind != exchange.KindBarrier || b.Barrier.GetCheckpointId() != id || !b.Priority {
			t.Fatalf("PollPriority: %s ok=%v priority=%v, want barrier(%d)", describe(b), ok, b.Priority, id)
		}
	}
	if b, _, ok := sub.PollPriority(); ok {
		t.Fatalf("PollPriority took %s, which is not a priority event", describe(b))
	}
	// Each barrier leaving the queue wakes the producer (it may wait for
	// that to acknowledge a checkpoint), though the queue is still full.
	if n := producerWakes.Load(); n != 2 {
		t.Fatalf("producer woken %d times for two barriers taken, want 2", n)
	}
	var got []string
	for {
		b, _, ok := sub.Poll()
		if !ok {
			break
		}
		got = append(got, describe(b))
	}
	want := []string{"records[0]", "records[1]", "records[2]", "cancel(4)"}
	if !slices.Equal(got, want) {
		t.Fatalf("queue after the priority events: %v, want %v", got, want)
	}
	// Falling below capacity (4 → 0 buffers: at 1) wakes the producer once more.
	if n := producerWakes.Load(); n != 3 {
		t.Fatalf("producer woken %d times, want 3", n)
	}
}

// A data Add at capacity+overdraft blocks until the consumer takes a buffer.
func TestSubpartitionBlocksDataAtLimit(t *testing.T) {
	ctx := t.Context()
	sub := exchange.NewSubpartition(1, 1)
	for i := range 2 {
		if _, err := sub.Add(ctx, numbered(i)); err != nil {
			t.Fatal(err)
		}
	}
	wctx := newWaitCtx(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := sub.Add(wctx, numbered(2))
		res <- err
	}()
	await(t, wctx.waiting, "Add to block at the limit")
	// A priority event goes in while the data Add is blocked.
	if _, err := sub.AddPriority(barrier(1)); err != nil {
		t.Fatal(err)
	}
	if b, _, _ := sub.Poll(); b.Kind != exchange.KindBarrier {
		t.Fatalf("head is %s, want the barrier", describe(b))
	}
	// The barrier went in past the limit; taking it leaves the queue at the
	// limit again, so the Add proceeds only once a data buffer is taken.
	if b, _, _ := sub.Poll(); number(t, b) != 0 {
		t.Fatal("lost buffer 0")
	}
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(long):
		t.Fatal("Add still blocked after the consumer took a buffer")
	}
}

// BroadcastPriority puts the barrier ahead of the queued buffers and of the
// batch not yet queued, on every subpartition, and reports both as
// overtaken; they are still delivered, after the barrier.
func TestRecordWriterBroadcastPriority(t *testing.T) {
	part := exchange.NewResultPartition(partitionID("priority"), 2, 10, 0)
	w := exchange.NewRecordWriter(t.Context(), part, weirv1.Partitioner_PARTITIONER_REBALANCE, 128, 0, 2)
	for i := range 5 { // key-0,2,4 → 0 (one full batch, key-4 pending); key-1,3 → 1 (one full batch)
		if err := w.Emit(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	over, err := w.BroadcastPriority(barrier(7))
	if err != nil {
		t.Fatal(err)
	}
	wantOver := [][]string{{"key-0", "key-2", "key-4"}, {"key-1", "key-3"}}
	for i := range over {
		if got := flat(over[i]); !slices.Equal(got, wantOver[i]) {
			t.Fatalf("subpartition %d: overtaken %v, want %v", i, got, wantOver[i])
		}
	}
	if err := w.Emit(key(5)); err != nil { // → 1, pending
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"barrier(7)", "key-0", "key-2", "key-4"},
		{"barrier(7)", "key-1", "key-3", "key-5"},
	}
	for i, sub := range part.Subs {
		if got := flat(drain(sub)); !slices.Equal(got, want[i]) {
			t.Fatalf("subpartition %d got %v, want %v", i, got, want[i])
		}
	}
}

// FlushAvailable never blocks: a full subpartition keeps its batch pending.
// Broadcast of an event never blocks either, even on a full queue.
func TestRecordWriterNeverBlocksOutsideEmit(t *testing.T) {
	part := exchange.NewResultPartition(partitionID("nonblocking"), 2, 1, 0)
	w := exchange.NewRecordWriter(t.Context(), part, weirv1.Partitioner_PARTITIONER_REBALANCE, 128, 0, 10)
	if _, err := part.Subs[0].Add(t.Context(), numbered(0)); err != nil {
		t.Fatal(err)
	}
	if w.Available() {
		t.Fatal("writer available with a full subpartition")
	}
	for i := range 2 { // key-0 → 0, key-1 → 1
		if err := w.Emit(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.FlushAvailable(); err != nil {
		t.Fatal(err)
	}
	if n, _ := part.Subs[0].Queued(); n != 1 {
		t.Fatalf("full subpartition holds %d buffers after FlushAvailable, want 1", n)
	}
	if n, _ := part.Subs[1].Queued(); n != 1 {
		t.Fatalf("available subpartition holds %d buffers after FlushAvailable, want 1", n)
	}
	if err := w.Broadcast(barrier(3)); err != nil {
		t.Fatal(err)
	}
	want := []string{"0", "key-0", "barrier(3)"}
	var got []string
	for _, b := range drain(part.Subs[0]) {
		if b.Kind == exchange.KindRecords && string(b.Records[0].Key) == "0" {
			got = append(got, "0")
			continue
		}
		got = append(got, flat([]exchange.Buffer{b})...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("subpartition 0 got %v, want %v", got, want)
	}
}

// A priority event crosses a remote channel without a credit while the
// consumer has granted none, overtakes the buffers the consumer already
// holds (reporting them as Overtaken) and returns no credit when taken.
func TestRemoteChannelPriorityEvent(t *testing.T) {
	const credits = 2
	reg := exchange.NewRegistry()
	srv := startServer(t, reg)
	conn := dial(t, srv.addr)
	ctx := t.Context()

	id := partitionID("remote-priority")
	part := exchange.NewResultPartition(id, 1, 1, 0)
	reg.Register(part)
	sub := part.Subs[0]
	n := newNotifier()
	ch, err := exchange.NewRemoteChannel(ctx, conn, id, 0, credits, n.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	// Two buffers use up the credits, the third stays in the subpartition:
	// with capacity 1, Add(2) returns only once the server took buffer 1.
	for i := range 3 {
		if _, err := sub.Add(ctx, numbered(i)); err != nil {
			t.Fatal(err)
		}
	}
	if q, _ := sub.Queued(); q != 1 {
		t.Fatalf("subpartition holds %d buffers, want 1", q)
	}
	over, err := sub.AddPriority(barrier(9))
	if err != nil {
		t.Fatal(err)
	}
	if got := numbers(t, over); !slices.Equal(got, []int{2}) {
		t.Fatalf("overtook %v in the subpartition, want [2]", got)
	}
	deadline := time.After(long)
	var b exchange.Buffer
	for {
		var ok bool
		if b, ok, err = ch.PollPriority(); err != nil {
			t.Fatal(err)
		} else if ok {
			break
		}
		select {
		case <-n.c:
		case <-deadline:
			t.Fatal("priority barrier did not arrive without credit")
		}
	}
	if b.Kind != exchange.KindBarrier || !b.Priority || b.Barrier.GetCheckpointId() != 9 {
		t.Fatalf("got %s priority=%v, want priority barrier(9)", describe(b), b.Priority)
	}
	if got := numbers(t, b.Overtaken); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("barrier overtook %v at the consumer, want [0 1]", got)
	}
	for want := range 3 {
		if got := number(t, next(t, ch, n)); got != want {
			t.Fatalf("buffer %d after the barrier, want %d", got, want)
		}
	}
	// The credits returned for three buffers (none for the barrier) let
	// exactly credits+capacity buffers through while the consumer does not
	// poll; an extra credit for the barrier would let one more through.
	for i := 3; i < 3+1+credits; i++ {
		if _, err := sub.Add(ctx, numbered(i)); err != nil {
			t.Fatal(err)
		}
	}
	wctx := newWaitCtx(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := sub.Add(wctx, numbered(6))
		res <- err
	}()
	await(t, wctx.waiting, "Add to block: credits and capacity used up")
	// Progress now would need a credit nobody granted; as in
	// TestRemoteChannelCreditFlowControl, a bounded wait that must see no
	// completion is the only way to assert its absence.
	select {
	case err := <-res:
		t.Fatalf("Add 6 returned (%v) while the consumer was not polling", err)
	case <-time.After(200 * time.Millisecond):
	}
	for want := 3; want <= 6; want++ {
		if got := number(t, next(t, ch, n)); got != want {
			t.Fatalf("buffer %d, want %d", got, want)
		}
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
}

// ConvertBarrier moves a queued aligned barrier ahead as a priority event,
// converted, behind earlier priority events, and reports what it overtook;
// a barrier no longer queued is not found.
func TestSubpartitionConvertBarrier(t *testing.T) {
	ctx := t.Context()
	sub := exchange.NewSubpartition(10, 0)
	for _, b := range []exchange.Buffer{numbered(0), barrier(3), numbered(1), barrier(4), numbered(2)} {
		if _, err := sub.Add(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sub.AddPriority(barrier(5)); err != nil {
		t.Fatal(err)
	}
	if !sub.HoldsBarrier(4) || sub.HoldsBarrier(6) {
		t.Fatal("HoldsBarrier wrong")
	}
	over, ok := sub.ConvertBarrier(4, func(b *weirv1.CheckpointBarrier) *weirv1.CheckpointBarrier {
		return &weirv1.CheckpointBarrier{CheckpointId: b.GetCheckpointId(), TimestampMs: 99}
	})
	if !ok {
		t.Fatal("barrier 4 not found")
	}
	if got := numbers(t, over); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("barrier 4 overtook %v, want [0 1]", got)
	}
	if _, ok := sub.ConvertBarrier(6, nil); ok {
		t.Fatal("converted a barrier that was never queued")
	}
	var got []string
	for _, b := range drain(sub) {
		s := describe(b)
		if b.Priority {
			s += "!"
		}
		if b.Kind == exchange.KindBarrier && b.Barrier.GetTimestampMs() == 99 {
			s += "converted"
		}
		got = append(got, s)
	}
	want := []string{"barrier(5)!", "barrier(4)!converted", "records[0]", "barrier(3)", "records[1]", "records[2]"}
	if !slices.Equal(got, want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
	if sub.HoldsBarrier(4) {
		t.Fatal("barrier 4 still held after it was taken")
	}
}

// The records a priority barrier overtook are the output state of its
// checkpoint, written while the consumer goes on processing, and
// releasing, the very batches they were queued in: they are a copy.
func TestOvertakenRecordsOutliveTheirBatches(t *testing.T) {
	part := exchange.NewResultPartition(partitionID("overtaken-copy"), 1, 10, 0)
	w := exchange.NewRecordWriter(t.Context(), part, weirv1.Partitioner_PARTITIONER_FORWARD, 128, 0, 2)
	for i := range 3 { // key-0,1 queued; key-2 pending
		if err := w.Emit(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	over, err := w.BroadcastPriority(barrier(7))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, b := range drain(part.Subs[0]) {
		if b.Kind == exchange.KindRecords {
			exchange.ReleaseRecords(b.Records)
		}
	}
	// A converted barrier's overtaken records, likewise.
	for i := 3; i < 5; i++ {
		if err := w.Emit(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Broadcast(barrier(8)); err != nil {
		t.Fatal(err)
	}
	converted, ok := part.Subs[0].ConvertBarrier(8, func(b *weirv1.CheckpointBarrier) *weirv1.CheckpointBarrier { return b })
	if !ok {
		t.Fatal("barrier 8 not held")
	}
	for _, b := range drain(part.Subs[0]) {
		if b.Kind == exchange.KindRecords {
			exchange.ReleaseRecords(b.Records)
		}
	}
	if got, want := flat(over[0]), []string{"key-0", "key-1", "key-2"}; !slices.Equal(got, want) {
		t.Fatalf("overtaken by the priority barrier: %v, want %v", got, want)
	}
	if got, want := flat(converted), []string{"key-3", "key-4"}; !slices.Equal(got, want) {
		t.Fatalf("overtaken by the converted barrier: %v, want %v", got, want)
	}
}
