// Package collect streams the result of a SQL query with no sink to the
// client that runs it (`weir sql`). The operator sql-collect, the query's
// last vertex, pushes each subtask's rows over a gRPC client stream
// (weir.v1.ResultSinkService/PushRows) to the Receiver the client serves
// at the query's plan.Collect.Address; the client prints them.
//
// The rows are record values in the binary row format (plan.FormatRow) of
// plan.Collect.In, passed through as they are: only the client decodes
// them. Delivery is best effort, neither exactly nor at least once: a
// restarted subtask sends again the rows since the checkpoint it restarted
// from, so the client may print a row twice, and rows still queued here
// when a subtask fails after a checkpoint completed are not sent again (a
// checkpoint does not wait for the client to have them). That is good
// enough for a terminal; a result that must be exact goes to a sink.
package collect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/sql/plan"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
	"github.com/weirproject/weir/sdk"
)

// Operator is the name the operator is registered under.
const Operator = "sql-collect"

const (
	// StallTimeout bounds how long a subtask waits for the client to take
	// its rows (and, at the end of the input, to confirm the last ones)
	// before it fails: a client that stopped reading must not hold the
	// job, whose cancellation waits for the record being processed. A
	// slow terminal takes rows far more often than this; a client that is
	// gone breaks the connection and fails the subtask at once.
	StallTimeout = 30 * time.Second
	// queueLen rows wait for the sender; while it sends one message the
	// next batch fills, so rows go out in batches under load and one at a
	// time when they trickle.
	queueLen      = 1024
	maxBatchRows  = 256
	maxBatchBytes = 256 << 10
)

// errEnough ends the sender when the client answered the stream: it
// wants no more rows (the query's LIMIT was reached).
var errEnough = errors.New("the client wants no more rows")

// Sink is the operator sql-collect.
type Sink struct {
	addr string
	log  *slog.Logger
	conn *grpc.ClientConn
	// cancel aborts the stream: the client sees the subtask go.
	cancel context.CancelFunc
	rows   chan []byte
	// inputEnded: rows is closed.
	inputEnded bool
	// done is closed when the sender stopped, err then says why: nil
	// after a clean end of input, errEnough, or the failure.
	done    chan struct{}
	err     error
	dropped int64
	// stall is StallTimeout; tests shorten it.
	stall time.Duration
}

func (s *Sink) Open(ctx sdk.Context) error {
	text, err := ctx.Config().String("plan", "")
	if err != nil {
		return fmt.Errorf("%s: %w", Operator, err)
	}
	op, err := plan.Unmarshal(text)
	if err != nil {
		return fmt.Errorf("%s: %w", Operator, err)
	}
	if op.Collect == nil || op.Collect.Address == "" {
		return fmt.Errorf("%s: the vertex's plan has no collect address", Operator)
	}
	s.addr, s.log = op.Collect.Address, ctx.Logger()
	if s.stall == 0 {
		s.stall = StallTimeout
	}
	// Plaintext: the operator has no credentials of its TaskManager, and
	// the client takes the rows of the one job it submitted only.
	if s.conn, err = rpc.Dial(s.addr, insecure.NewCredentials()); err != nil {
		return fmt.Errorf("%s: %w", Operator, err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	// Not WaitForReady: a client that cannot be reached fails the subtask
	// now, with the reason, instead of at the first row.
	stream, err := weirv1grpc.NewResultSinkServiceClient(s.conn).PushRows(sctx)
	if err != nil {
		cancel()
		return fmt.Errorf("%s: cannot reach the client at %s (is --collect-address reachable from the TaskManagers?): %w", Operator, s.addr, err)
	}
	s.cancel, s.rows, s.done = cancel, make(chan []byte, queueLen), make(chan struct{})
	first := &weirv1.PushRowsRequest{JobId: ctx.JobID(), SubtaskIndex: int32(ctx.SubtaskIndex())}
	go s.send(stream, first)
	return nil
}

// send sends the queued rows in batches until the queue is closed (then
// waits for the client's answer), the client answers or the stream breaks.
func (s *Sink) send(stream weirv1grpc.ResultSinkService_PushRowsClient, req *weirv1.PushRowsRequest) {
	defer close(s.done)
	// The first message goes out at once: the client learns of the
	// subtask before its first row.
	if err := stream.Send(req); err != nil {
		s.err = s.why(stream, err)
		return
	}
	for {
		req = &weirv1.PushRowsRequest{}
		row, ok := <-s.rows
		if !ok {
			if _, err := stream.CloseAndRecv(); err != nil {
				s.err = fmt.Errorf("%s: the client at %s: %w", Operator, s.addr, err)
			}
			return
		}
		size := len(row)
		req.Rows = append(req.Rows, row)
	batch:
		for len(req.Rows) < maxBatchRows && size < maxBatchBytes {
			select {
			case row, ok := <-s.rows:
				if !ok {
					break batch
				}
				size += len(row)
				req.Rows = append(req.Rows, row)
			default:
				break batch
			}
		}
		if err := stream.Send(req); err != nil {
			s.err = s.why(stream, err)
			return
		}
	}
}

// why says why Send failed: io.EOF is the client's answer, whose status
// RecvMsg gives (OK: it wants no more rows).
func (s *Sink) why(stream weirv1grpc.ResultSinkService_PushRowsClient, err error) error {
	if errors.Is(err, io.EOF) {
		if err = stream.RecvMsg(&weirv1.PushRowsResponse{}); err == nil {
			return errEnough
		}
	}
	return fmt.Errorf("%s: sending rows to the client at %s: %w", Operator, s.addr, err)
}

func (s *Sink) ProcessRecord(r sdk.Record, _ sdk.Collector) error {
	select {
	case s.rows <- r.Value:
		return nil
	case <-s.done:
		return s.stopped()
	default:
	}
	t := time.NewTimer(s.stall)
	defer t.Stop()
	select {
	case s.rows <- r.Value:
		return nil
	case <-s.done:
		return s.stopped()
	case <-t.C:
		return fmt.Errorf("%s: the client at %s took no rows for %s", Operator, s.addr, s.stall)
	}
}

// stopped is ProcessRecord's answer once the sender stopped: the row is
// dropped when the client wants no more, the failure otherwise.
func (s *Sink) stopped() error {
	if s.err != errEnough {
		return s.err
	}
	if s.dropped == 0 {
		s.log.Info("the client wants no more rows; dropping the rest", "client", s.addr)
	}
	s.dropped++
	return nil
}

// EndInput sends the last rows and waits for the client to confirm them,
// so that the job finishes only once the client has every row.
func (s *Sink) EndInput(sdk.Collector) error {
	s.inputEnded = true
	close(s.rows)
	select {
	case <-s.done:
	case <-time.After(s.stall):
		return fmt.Errorf("%s: the client at %s did not confirm the last rows within %s", Operator, s.addr, s.stall)
	}
	if s.err == errEnough {
		return nil
	}
	return s.err
}

func (s *Sink) Close() error {
	if s.conn == nil {
		return nil
	}
	if s.done != nil {
		// Cancelling the stream unblocks a sender in Send, closing rows
		// one waiting for rows.
		s.cancel()
		if !s.inputEnded {
			close(s.rows)
		}
		<-s.done
	}
	if s.dropped > 0 {
		s.log.Info("rows dropped after the client wanted no more", "client", s.addr, "rows", s.dropped)
	}
	return s.conn.Close()
}
