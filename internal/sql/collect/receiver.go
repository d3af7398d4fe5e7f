package collect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/rpc"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// Receiver is the client's side: it serves ResultSinkService and takes
// the rows of one query at a time, the job Receive names. A stream of a
// job that is not the client's is refused; one of a job whose rows the
// client no longer wants is answered at once, so its subtask drops them.
type Receiver struct {
	weirv1grpc.UnimplementedResultSinkServiceServer

	srv  *grpc.Server
	lis  net.Listener
	addr string

	mu sync.Mutex
	// changed is closed, and replaced, whenever cur or done changes.
	changed chan struct{}
	cur     *Query
	done    map[string]bool
}

// Listen serves a Receiver on addr, host:port. An empty host is every
// interface; port 0 (or none), a free one. An empty addr is the address of
// this host toward toward (host:port: the JobManager, the TaskManagers'
// network), port free. Address is what to give the query's plan.
func Listen(addr, toward string) (*Receiver, error) {
	host, port := "", "0"
	if addr != "" {
		var err error
		if host, port, err = net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("collect address %q: %w", addr, err)
		}
		if port == "" {
			port = "0"
		}
	}
	advertise := host
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		local, err := localAddressToward(toward)
		if err != nil {
			return nil, err
		}
		advertise = local.String()
		if addr == "" {
			// Only the interface the TaskManagers are reached through.
			host = advertise
		}
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("collect: listen: %w", err)
	}
	srv, _ := rpc.NewServer(insecure.NewCredentials())
	r := &Receiver{
		srv: srv, lis: lis, changed: make(chan struct{}), done: map[string]bool{},
		addr: net.JoinHostPort(advertise, strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)),
	}
	weirv1grpc.RegisterResultSinkServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	return r, nil
}

// localAddressToward is the address of the interface this host reaches
// hostport through (no packet is sent: a UDP socket is only routed).
func localAddressToward(hostport string) (net.IP, error) {
	c, err := net.Dial("udp", hostport)
	if err != nil {
		return nil, fmt.Errorf("collect: find this host's address toward %s (give --collect-address): %w", hostport, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP, nil
}

// Address is where the TaskManagers reach the receiver.
func (r *Receiver) Address() string { return r.addr }

// closeGrace is how long Close lets the answers already given reach
// the subtasks before it breaks the streams left.
const closeGrace = time.Second

// Close stops serving.
func (r *Receiver) Close() {
	stopped := make(chan struct{})
	go func() {
		r.srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(closeGrace):
		r.srv.Stop()
		<-stopped
	}
}

// Batch is rows of one subtask, in the order it sent them.
type Batch struct {
	Subtask int
	Rows    [][]byte
}

// Query is the rows of one job as they arrive.
type Query struct {
	r       *Receiver
	job     string
	batches chan Batch
	stop    chan struct{}
}

// Receive starts taking job's rows; streams of it that came before wait
// for it. Call Done on the previous query first.
func (r *Receiver) Receive(job string) *Query {
	// Unbuffered: a stream takes its next message only once the client
	// took the last, so a slow client back-pressures the job.
	q := &Query{r: r, job: job, batches: make(chan Batch), stop: make(chan struct{})}
	r.mu.Lock()
	r.cur = q
	r.changedLocked()
	r.mu.Unlock()
	return q
}

// Batches delivers the rows. A job that finished (FINISHED) sent every
// row it had before: its subtasks wait for the client to take them.
func (q *Query) Batches() <-chan Batch { return q.batches }

// Done says the client wants no more of the job's rows: its streams are
// answered, now and when they come.
func (q *Query) Done() {
	r := q.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done[q.job] {
		return
	}
	r.done[q.job] = true
	if r.cur == q {
		r.cur = nil
	}
	close(q.stop)
	r.changedLocked()
}

func (r *Receiver) changedLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// query waits until the client says what it does with job's rows: the
// query taking them, nil for none wanted, or an error for a job that is
// not the client's.
func (r *Receiver) query(ctx context.Context, job string) (*Query, error) {
	for {
		r.mu.Lock()
		cur, changed, done := r.cur, r.changed, r.done[job]
		r.mu.Unlock()
		switch {
		case done:
			return nil, nil
		case cur != nil && cur.job == job:
			return cur, nil
		case cur != nil:
			// The client runs one query at a time, and the next only
			// once it is done with this one.
			return nil, status.Errorf(codes.PermissionDenied, "this client takes the rows of job %s, not of job %s", cur.job, job)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}

func (r *Receiver) PushRows(stream weirv1grpc.ResultSinkService_PushRowsServer) error {
	ctx := stream.Context()
	req, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return stream.SendAndClose(&weirv1.PushRowsResponse{})
	} else if err != nil {
		return err
	}
	q, err := r.query(ctx, req.GetJobId())
	if err != nil {
		return err
	}
	if q == nil {
		return stream.SendAndClose(&weirv1.PushRowsResponse{})
	}
	// Messages are read apart, so that the stream is answered as soon
	// as the client wants no more rows, also while the subtask sends none.
	msgs, failed := make(chan *weirv1.PushRowsRequest), make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				failed <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	subtask := int(req.GetSubtaskIndex())
	for {
		if len(req.GetRows()) > 0 {
			select {
			case q.batches <- Batch{Subtask: subtask, Rows: req.GetRows()}:
			case <-q.stop:
				return stream.SendAndClose(&weirv1.PushRowsResponse{})
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		select {
		case req = <-msgs:
		case err := <-failed:
			if errors.Is(err, io.EOF) {
				// Answered only now: the subtask's end of input waits
				// for it, so the job finishes after the client took
				// every row.
				return stream.SendAndClose(&weirv1.PushRowsResponse{})
			}
			return err
		case <-q.stop:
			return stream.SendAndClose(&weirv1.PushRowsResponse{})
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}
