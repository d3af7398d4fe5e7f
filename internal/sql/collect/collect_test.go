package collect

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/sdktest"
	"github.com/weirproject/weir/internal/sql/plan"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
	"github.com/weirproject/weir/sdk"
)

// Every test must leave no goroutine behind: the operator's sender and
// the receiver's streams end with them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func listen(t *testing.T) *Receiver {
	t.Helper()
	r, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// open opens subtask i of a sql-collect vertex sending to addr.
func open(t *testing.T, addr string, subtask int) *Sink {
	t.Helper()
	s := &Sink{stall: 200 * time.Millisecond}
	if err := s.Open(sdktest.NewContext("collect", config(t, addr), subtask, 3)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func config(t *testing.T, addr string) sdk.Config {
	t.Helper()
	p, err := plan.Marshal(&plan.Operator{Collect: &plan.Collect{Address: addr}})
	if err != nil {
		t.Fatal(err)
	}
	return sdk.Config{"plan": p}
}

func row(subtask, i int) sdk.Record {
	return sdk.Record{Value: fmt.Appendf(nil, "%d/%d", subtask, i)}
}

// take reads batches until it has n rows, by subtask.
func take(t *testing.T, q *Query, n int) map[int][]string {
	t.Helper()
	got := map[int][]string{}
	for seen := 0; seen < n; {
		b := poll.Recv(t, q.Batches(), 10*time.Second, "rows")
		for _, r := range b.Rows {
			got[b.Subtask] = append(got[b.Subtask], string(r))
		}
		seen += len(b.Rows)
	}
	return got
}

func TestRowsOfEverySubtaskArriveInOrder(t *testing.T) {
	r := listen(t)
	// Streams that come before the client knows its job's ID wait for it.
	var sinks []*Sink
	for i := range 3 {
		sinks = append(sinks, open(t, r.Address(), i))
	}
	const n = 2000
	var wg sync.WaitGroup
	errs := make(chan error, len(sinks))
	for i, s := range sinks {
		wg.Go(func() {
			for j := range n {
				if err := s.ProcessRecord(row(i, j), nil); err != nil {
					errs <- err
					return
				}
			}
			errs <- s.EndInput(nil)
		})
	}
	q := r.Receive("job-test")
	got := take(t, q, 3*n)
	wg.Wait()
	for range sinks {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		want := make([]string, n)
		for j := range want {
			want[j] = string(row(i, j).Value)
		}
		if !slices.Equal(got[i], want) {
			t.Errorf("subtask %d: got %d rows, not its %d in order", i, len(got[i]), n)
		}
	}
}

// TestEndOfInputWaitsForTheClient: a subtask's end of input returns only
// once the client took its last rows, so a FINISHED job has delivered
// every row.
func TestEndOfInputWaitsForTheClient(t *testing.T) {
	r := listen(t)
	s := open(t, r.Address(), 0)
	s.stall = 10 * time.Second
	q := r.Receive("job-test")
	if err := s.ProcessRecord(row(0, 0), nil); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- s.EndInput(nil) }()
	select {
	case err := <-ended:
		t.Fatalf("end of input returned (%v) before the client took the row", err)
	case <-time.After(200 * time.Millisecond):
	}
	take(t, q, 1)
	if err := poll.Recv(t, ended, 10*time.Second, "end of input"); err != nil {
		t.Fatal(err)
	}
}

// TestEnoughRowsDropsTheRest: once the client has the rows it wants (a
// LIMIT), the subtasks drop theirs without failing, and a subtask that
// connects afterwards too.
func TestEnoughRowsDropsTheRest(t *testing.T) {
	r := listen(t)
	s := open(t, r.Address(), 0)
	q := r.Receive("job-test")
	if err := s.ProcessRecord(row(0, 0), nil); err != nil {
		t.Fatal(err)
	}
	take(t, q, 1)
	q.Done()
	poll.UntilNoError(t, 10*time.Second, time.Millisecond, "the subtask dropping rows", func() (bool, error) {
		if err := s.ProcessRecord(row(0, 1), nil); err != nil {
			return false, err
		}
		return s.dropped > 0, nil
	})
	if err := s.EndInput(nil); err != nil {
		t.Fatal(err)
	}

	late := open(t, r.Address(), 1)
	poll.UntilNoError(t, 10*time.Second, time.Millisecond, "the late subtask dropping rows", func() (bool, error) {
		if err := late.ProcessRecord(row(1, 0), nil); err != nil {
			return false, err
		}
		return late.dropped > 0, nil
	})
}

// TestDoneAnswersIdleStreams: the streams of a job whose rows the client
// no longer wants are answered at once, also those of subtasks that send
// nothing, so the client can close without breaking them.
func TestDoneAnswersIdleStreams(t *testing.T) {
	r := listen(t)
	conn, err := grpc.NewClient(r.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := weirv1grpc.NewResultSinkServiceClient(conn).PushRows(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&weirv1.PushRowsRequest{JobId: "j", Rows: [][]byte{[]byte("r")}}); err != nil {
		t.Fatal(err)
	}
	q := r.Receive("j")
	if b := poll.Recv(t, q.Batches(), 10*time.Second, "the row"); string(b.Rows[0]) != "r" {
		t.Fatalf("got %q", b.Rows)
	}
	q.Done()
	if err := stream.RecvMsg(&weirv1.PushRowsResponse{}); err != nil {
		t.Errorf("the idle stream ended with %v, want the client's answer", err)
	}
}

// failure processes rows until the subtask fails, and returns why.
func failure(t *testing.T, s *Sink) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if err := s.ProcessRecord(row(0, i), nil); err != nil {
			return err
		}
	}
	t.Fatal("the subtask never failed")
	return nil
}

func TestAnotherJobsRowsAreRefused(t *testing.T) {
	r := listen(t)
	r.Receive("the-clients-job")
	err := failure(t, open(t, r.Address(), 0))
	if !strings.Contains(err.Error(), "not of job job-test") {
		t.Errorf("err = %v, want the refusal", err)
	}
}

func TestClientGone(t *testing.T) {
	t.Run("before the subtask opens", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		lis.Close()
		s := &Sink{}
		err = s.Open(sdktest.NewContext("collect", config(t, addr), 0, 1))
		if err == nil || !strings.Contains(err.Error(), "cannot reach the client at "+addr) {
			t.Errorf("Open = %v, want it to fail naming the client", err)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Run("while rows flow", func(t *testing.T) {
		r := listen(t)
		s := open(t, r.Address(), 0)
		q := r.Receive("job-test")
		if err := s.ProcessRecord(row(0, 0), nil); err != nil {
			t.Fatal(err)
		}
		take(t, q, 1)
		r.Close()
		if err := failure(t, s); !strings.Contains(err.Error(), "sending rows to the client") {
			t.Errorf("err = %v, want the broken stream", err)
		}
	})
}

// TestStalledClientFailsTheSubtask: a client that takes no rows fails the
// subtask after the stall timeout instead of holding it for ever.
func TestStalledClientFailsTheSubtask(t *testing.T) {
	r := listen(t)
	s := open(t, r.Address(), 0)
	r.Receive("job-test")
	if err := failure(t, s); !strings.Contains(err.Error(), "took no rows for 200ms") {
		t.Errorf("err = %v, want the stall", err)
	}
	if err := s.EndInput(nil); err == nil || !strings.Contains(err.Error(), "did not confirm") {
		t.Errorf("EndInput = %v, want the stall", err)
	}
}

func TestListenAddress(t *testing.T) {
	for _, c := range []struct {
		addr, toward string
		// want is the advertised host, with the port Listen picked.
		want string
	}{
		{"", "127.0.0.1:6123", "127.0.0.1"},
		{":0", "127.0.0.1:6123", "127.0.0.1"},
		{"0.0.0.0:0", "127.0.0.1:6123", "127.0.0.1"},
		{"127.0.0.1:0", "", "127.0.0.1"},
		{"localhost:0", "", "localhost"},
	} {
		r, err := Listen(c.addr, c.toward)
		if err != nil {
			t.Errorf("Listen(%q, %q): %v", c.addr, c.toward, err)
			continue
		}
		host, port, err := net.SplitHostPort(r.Address())
		if err != nil || host != c.want || port == "0" {
			t.Errorf("Listen(%q, %q).Address() = %q, want %s and the port it listens on", c.addr, c.toward, r.Address(), c.want)
		}
		r.Close()
	}
	if _, err := Listen("no-port", ""); err == nil || !strings.Contains(err.Error(), `collect address "no-port"`) {
		t.Errorf("Listen without a port = %v", err)
	}
}
