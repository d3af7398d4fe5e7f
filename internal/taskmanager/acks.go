package taskmanager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// ackTimeout bounds one call carrying acks to the JobManager.
const ackTimeout = 10 * time.Second

// maxAckBatchBytes bounds the acks of one call, well below the gRPC
// message limit: acks with large inline state go in several calls.
const maxAckBatchBytes = 8 << 20

// ackGateway is the part of the JobManager's gateway the acks go through.
type ackGateway interface {
	AcknowledgeCheckpoint(ctx context.Context, in *weirv1.AcknowledgeCheckpointRequest, opts ...grpc.CallOption) (*weirv1.AcknowledgeCheckpointResponse, error)
	AcknowledgeCheckpoints(ctx context.Context, in *weirv1.AcknowledgeCheckpointsRequest, opts ...grpc.CallOption) (*weirv1.AcknowledgeCheckpointsResponse, error)
}

// ackSender sends the checkpoint acks of this TaskManager's subtasks. The
// first ack goes at once; those that become ready while a call is under
// way go together in the next one. The subtasks of a checkpoint finish
// their snapshots at about the same time, so a TaskManager sends one or
// two calls per checkpoint instead of one per subtask, and no ack waits
// for another.
type ackSender struct {
	gateway func() (ackGateway, error)

	mu      sync.Mutex
	queue   []*queuedAck
	sending bool

	// onQueued, when set, is called (under the lock) when an ack waits
	// for the call under way: tests wait on it instead of sleeping.
	onQueued func()
}

type queuedAck struct {
	ctx  context.Context
	req  *weirv1.AcknowledgeCheckpointRequest
	done chan error
}

// Acknowledge sends req, with the acks queued meanwhile, and returns once
// the JobManager took it or refused it, or ctx (the subtask's) ends. An ack
// whose subtask is cancelled before its call starts is not sent.
func (a *ackSender) Acknowledge(ctx context.Context, req *weirv1.AcknowledgeCheckpointRequest) error {
	q := &queuedAck{ctx: ctx, req: req, done: make(chan error, 1)}
	a.mu.Lock()
	a.queue = append(a.queue, q)
	if !a.sending {
		a.sending = true
		go a.run()
	} else if a.onQueued != nil {
		a.onQueued()
	}
	a.mu.Unlock()
	select {
	case err := <-q.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run sends what is queued, call after call, until the queue is empty.
func (a *ackSender) run() {
	for {
		a.mu.Lock()
		batch := a.take()
		if len(batch) == 0 {
			a.sending = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()

		live := batch[:0]
		for _, q := range batch {
			if err := q.ctx.Err(); err != nil {
				q.done <- err
				continue
			}
			live = append(live, q)
		}
		if len(live) == 0 {
			continue
		}
		errs := a.send(live)
		for i, q := range live {
			q.done <- errs[i]
		}
	}
}

// take removes the acks of the next call from the queue: all of them, or
// as many as fit maxAckBatchBytes (at least one).
func (a *ackSender) take() []*queuedAck {
	n, size := 0, 0
	for n < len(a.queue) {
		size += proto.Size(a.queue[n].req)
		if n > 0 && size > maxAckBatchBytes {
			break
		}
		n++
	}
	batch := a.queue[:n:n]
	a.queue = a.queue[n:]
	if len(a.queue) == 0 {
		a.queue = nil
	}
	return batch
}

// send makes one call for the acks of batch and returns each ack's error.
// A single ack goes as AcknowledgeCheckpoint; so does each of several when
// the JobManager does not know AcknowledgeCheckpoints (an older one, while
// a cluster is upgraded).
func (a *ackSender) send(batch []*queuedAck) []error {
	errs := make([]error, len(batch))
	fail := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	jm, err := a.gateway()
	if err != nil {
		return fail(err)
	}
	// Each call has its own deadline, so a slow call does not use up the
	// time of the acks sent after it.
	one := func() []error {
		for i, q := range batch {
			ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
			_, errs[i] = jm.AcknowledgeCheckpoint(ctx, q.req)
			cancel()
		}
		return errs
	}
	if len(batch) == 1 {
		return one()
	}
	req := &weirv1.AcknowledgeCheckpointsRequest{Acks: make([]*weirv1.AcknowledgeCheckpointRequest, len(batch))}
	for i, q := range batch {
		req.Acks[i] = q.req
	}
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	resp, err := jm.AcknowledgeCheckpoints(ctx, req)
	cancel()
	switch {
	case status.Code(err) == codes.Unimplemented:
		return one()
	case err != nil:
		return fail(err)
	case len(resp.GetErrors()) != len(batch):
		return fail(fmt.Errorf("taskmanager: the jobmanager answered %d of %d acks", len(resp.GetErrors()), len(batch)))
	}
	for i, msg := range resp.GetErrors() {
		if msg != "" {
			errs[i] = errors.New(msg)
		}
	}
	return errs
}
