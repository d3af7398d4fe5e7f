package exchange

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"google.golang.org/grpc"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// InputChannel is the consumer end of one producer→consumer channel.
type InputChannel interface {
	// Poll takes the next buffer without blocking.
	Poll() (Buffer, bool, error)
	// PollPriority takes the next buffer only if it is a priority event,
	// which a subtask handles even while it reads nothing else (its output
	// is full, or the channel is blocked for an alignment).
	PollPriority() (Buffer, bool, error)
	// Close stops the channel; buffers still queued are dropped.
	Close()
}

// localChannel reads a subpartition of the same TaskManager directly.
type localChannel struct {
	sub *Subpartition
}

// NewLocalChannel attaches to a subpartition in this process. notify is
// called whenever data arrives on an empty channel.
func NewLocalChannel(sub *Subpartition, notify func()) InputChannel {
	sub.SetListener(notify)
	return &localChannel{sub: sub}
}

func (c *localChannel) Poll() (Buffer, bool, error) {
	b, _, ok := c.sub.Poll()
	return b, ok, nil
}

func (c *localChannel) PollPriority() (Buffer, bool, error) {
	b, _, ok := c.sub.PollPriority()
	return b, ok, nil
}

func (c *localChannel) Close() { c.sub.SetListener(nil) }

// remoteChannel receives a subpartition of another TaskManager over a
// DataExchange stream. Its queue never holds more buffers than the credits
// it granted, plus priority events, which travel without credit and go to
// the head of the queue.
type remoteChannel struct {
	notify  func()
	metrics *Metrics
	cancel  context.CancelFunc
	// creditReady wakes the goroutine that returns credits to the producer.
	creditReady chan struct{}
	done        chan struct{}

	mu struct {
		sync.Mutex
		queue []Buffer
		// priority counts the priority events at the head of queue.
		priority int
		credits  int32 // consumed buffers not yet granted back
		err      error
		eop      bool
	}
}

// NewRemoteChannel subscribes to a subpartition on the TaskManager behind
// conn. credits bounds the buffers in flight for this channel.
func NewRemoteChannel(ctx context.Context, conn grpc.ClientConnInterface, id *weirv1.ResultPartitionID, subpartition, credits int, notify func()) (InputChannel, error) {
	return (*Metrics)(nil).NewRemoteChannel(ctx, conn, id, subpartition, credits, notify)
}

// NewRemoteChannel is the package's NewRemoteChannel counting what the
// channel receives in m.
func (m *Metrics) NewRemoteChannel(ctx context.Context, conn grpc.ClientConnInterface, id *weirv1.ResultPartitionID, subpartition, credits int, notify func()) (InputChannel, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := weirv1grpc.NewDataExchangeServiceClient(conn).Subscribe(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("exchange: subscribe to %s: %w", PartitionKey(id), err)
	}
	err = stream.Send(&weirv1.ExchangeRequest{Kind: &weirv1.ExchangeRequest_Subscribe{Subscribe: &weirv1.SubscribePartition{
		Partition: id, Subpartition: int32(subpartition), InitialCredit: int32(credits),
	}}})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("exchange: subscribe to %s: %w", PartitionKey(id), err)
	}
	c := &remoteChannel{notify: notify, metrics: m, cancel: cancel, creditReady: make(chan struct{}, 1), done: make(chan struct{})}
	go c.receive(stream)
	go c.grantCredits(ctx, stream)
	return c, nil
}

func (c *remoteChannel) receive(stream weirv1grpc.DataExchangeService_SubscribeClient) {
	defer close(c.done)
	for {
		m, err := stream.Recv()
		if err == nil {
			var b Buffer
			b, err = FromProto(m)
			if err == nil {
				c.metrics.received(m, len(b.Records))
				c.mu.Lock()
				var wake bool
				if b.Priority {
					c.enqueuePriorityLocked(b)
					wake = true
				} else {
					c.mu.queue = append(c.mu.queue, b)
					wake = len(c.mu.queue) == 1
				}
				if b.Kind == KindEndOfPartition {
					c.mu.eop = true
				}
				c.mu.Unlock()
				if wake {
					c.notify()
				}
				if b.Kind == KindEndOfPartition {
					return
				}
				continue
			}
		}
		c.mu.Lock()
		if !c.mu.eop {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			c.mu.err = fmt.Errorf("exchange: remote channel: %w", err)
		}
		c.mu.Unlock()
		c.notify()
		return
	}
}

// enqueuePriorityLocked puts priority event b ahead of the buffers queued,
// behind earlier priority events, with a copy of the records buffers it
// overtook: they were sent before it.
func (c *remoteChannel) enqueuePriorityLocked(b Buffer) {
	at := c.mu.priority
	for _, q := range c.mu.queue[at:] {
		if q.Kind == KindRecords {
			b.Overtaken = append(b.Overtaken, q)
		}
	}
	// The subtask releases the queued batches once it processed them.
	b.Overtaken = CloneRecords(b.Overtaken)
	c.mu.queue = slices.Insert(c.mu.queue, at, b)
	c.mu.priority++
}

// grantCredits batches credit grants: however many buffers the consumer took
// since the last grant go back in one message.
func (c *remoteChannel) grantCredits(ctx context.Context, stream weirv1grpc.DataExchangeService_SubscribeClient) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			_ = stream.CloseSend()
			return
		case <-c.creditReady:
		}
		c.mu.Lock()
		n := c.mu.credits
		c.mu.credits = 0
		c.mu.Unlock()
		if n == 0 {
			continue
		}
		if err := stream.Send(&weirv1.ExchangeRequest{Kind: &weirv1.ExchangeRequest_Credit{Credit: n}}); err != nil {
			return // receive sees the stream's error
		}
	}
}

func (c *remoteChannel) Poll() (Buffer, bool, error) { return c.poll(false) }

func (c *remoteChannel) PollPriority() (Buffer, bool, error) { return c.poll(true) }

func (c *remoteChannel) poll(priorityOnly bool) (Buffer, bool, error) {
	c.mu.Lock()
	if len(c.mu.queue) == 0 || (priorityOnly && c.mu.priority == 0) {
		var err error
		if len(c.mu.queue) == 0 {
			err = c.mu.err
		}
		c.mu.Unlock()
		return Buffer{}, false, err
	}
	b := c.mu.queue[0]
	c.mu.queue[0] = Buffer{}
	c.mu.queue = c.mu.queue[1:]
	if c.mu.priority > 0 {
		c.mu.priority--
	}
	if b.Priority {
		// It came without a credit; there is none to return.
		c.mu.Unlock()
		return b, true, nil
	}
	c.mu.credits++
	c.mu.Unlock()
	select {
	case c.creditReady <- struct{}{}:
	default:
	}
	return b, true, nil
}

func (c *remoteChannel) Close() {
	c.cancel()
	<-c.done
}

// Server serves this TaskManager's result partitions to remote consumers.
type Server struct {
	weirv1grpc.UnimplementedDataExchangeServiceServer
	Partitions *Registry
	Metrics    *Metrics // nil: not counted
}

// Subscribe streams one subpartition, one buffer per granted credit;
// priority events go at once, without a credit.
func (s *Server) Subscribe(stream weirv1grpc.DataExchangeService_SubscribeServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	sub := req.GetSubscribe()
	if sub == nil {
		return fmt.Errorf("exchange: first message must subscribe")
	}
	ctx := stream.Context()
	part, err := s.Partitions.Lookup(ctx, sub.GetPartition())
	if err != nil {
		return err
	}
	idx := int(sub.GetSubpartition())
	if idx < 0 || idx >= len(part.Subs) {
		return fmt.Errorf("exchange: partition %s has no subpartition %d", PartitionKey(part.ID), idx)
	}
	sp := part.Subs[idx]
	ready := make(chan struct{}, 1)
	wake := func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	}
	sp.SetListener(wake)
	defer sp.SetListener(nil)

	var mu sync.Mutex
	credit := sub.GetInitialCredit()
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			mu.Lock()
			credit += m.GetCredit()
			mu.Unlock()
			wake()
		}
	}()
	for {
		for {
			mu.Lock()
			c := credit
			mu.Unlock()
			var (
				b       Buffer
				backlog int
				ok      bool
			)
			if c > 0 {
				b, backlog, ok = sp.Poll()
			} else {
				b, backlog, ok = sp.PollPriority()
			}
			if !ok {
				break
			}
			m := b.ToProto()
			m.Backlog = int32(backlog)
			if err := stream.Send(m); err != nil {
				return err
			}
			s.Metrics.sent(m, len(b.Records))
			if b.Kind == KindRecords {
				// Encoded into a payload of its own: the batch is free.
				ReleaseRecords(b.Records)
			}
			if !b.Priority {
				mu.Lock()
				credit--
				mu.Unlock()
			}
			if b.Kind == KindEndOfPartition {
				return nil
			}
		}
		select {
		case <-ready:
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
