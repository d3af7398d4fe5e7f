package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

const sqlSource = "CREATE SOURCE s (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector='sequence', count='1000', keys='4');\n"

// sqlJobManager is a JobManager whose jobs run until cancelled, or until
// a test ends them, and that hands the test each submitted graph.
type sqlJobManager struct {
	fakeJobManager
	graphs chan *weirv1.JobGraph

	mu        sync.Mutex
	jobs      map[string]*weirv1.JobInfo
	cancelled []string
}

func startSQLFake(t *testing.T) (*sqlJobManager, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &sqlJobManager{graphs: make(chan *weirv1.JobGraph, 16), jobs: map[string]*weirv1.JobInfo{}}
	srv := grpc.NewServer()
	weirv1grpc.RegisterClientServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f, lis.Addr().String()
}

func (f *sqlJobManager) SubmitJob(_ context.Context, req *weirv1.SubmitJobRequest) (*weirv1.SubmitJobResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := "job-" + req.GetJob().GetName()
	f.jobs[id] = &weirv1.JobInfo{Id: id, Name: req.GetJob().GetName(), State: weirv1.JobState_JOB_STATE_RUNNING, Graph: req.GetJob()}
	f.graphs <- req.GetJob()
	return &weirv1.SubmitJobResponse{JobId: id}, nil
}

func (f *sqlJobManager) GetJob(_ context.Context, req *weirv1.GetJobRequest) (*weirv1.GetJobResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[req.GetJobId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no job %s", req.GetJobId())
	}
	return &weirv1.GetJobResponse{Job: &weirv1.JobInfo{Id: j.Id, Name: j.Name, State: j.State, Restarts: j.Restarts, FailureCause: j.FailureCause}}, nil
}

func (f *sqlJobManager) CancelJob(_ context.Context, req *weirv1.CancelJobRequest) (*weirv1.CancelJobResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, req.GetJobId())
	f.jobs[req.GetJobId()].State = weirv1.JobState_JOB_STATE_CANCELED
	return &weirv1.CancelJobResponse{}, nil
}

// set changes a job as the JobManager would.
func (f *sqlJobManager) set(id string, change func(*weirv1.JobInfo)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.jobs[id])
}

func (f *sqlJobManager) wasCancelled(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.cancelled, id)
}

func (f *sqlJobManager) graph(t *testing.T) *weirv1.JobGraph {
	t.Helper()
	select {
	case g := <-f.graphs:
		return g
	case <-time.After(10 * time.Second):
		t.Fatal("no job submitted")
		return nil
	}
}

// subtask streams rows to the address in a SELECT's collect vertex, as
// subtask i of sql-collect does.
type subtask struct {
	t      *testing.T
	stream weirv1grpc.ResultSinkService_PushRowsClient
	codec  *row.Codec
}

func newSubtask(t *testing.T, g *weirv1.JobGraph, i int) *subtask {
	t.Helper()
	var c *plan.Collect
	for _, v := range g.GetVertices() {
		if v.GetOperator() == "sql-collect" {
			op, err := plan.Unmarshal(v.GetConfig().AsMap()["plan"].(string))
			if err != nil {
				t.Fatal(err)
			}
			c = op.Collect
		}
	}
	if c == nil {
		t.Fatalf("the graph has no sql-collect vertex: %v", g)
	}
	conn, err := grpc.NewClient(c.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stream, err := weirv1grpc.NewResultSinkServiceClient(conn).PushRows(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s := &subtask{t: t, stream: stream, codec: row.NewCodec(c.In)}
	if err := stream.Send(&weirv1.PushRowsRequest{JobId: "job-" + g.GetName(), SubtaskIndex: int32(i)}); err != nil {
		t.Fatal(err)
	}
	return s
}

// send sends rows of (k BIGINT, v BIGINT); it reports whether the client
// still wants rows.
func (s *subtask) send(rows ...[2]int64) bool {
	req := &weirv1.PushRowsRequest{}
	for _, r := range rows {
		req.Rows = append(req.Rows, s.codec.Append(nil, row.Row{row.Int(r[0]), row.Int(r[1])}))
	}
	return s.stream.Send(req) == nil
}

// end ends the stream as a subtask whose input ended.
func (s *subtask) end() {
	if _, err := s.stream.CloseAndRecv(); err != nil {
		s.t.Error(err)
	}
}

// runAsync runs the CLI while the test plays the cluster.
func runAsync(t *testing.T, args ...string) <-chan result {
	done := make(chan result, 1)
	go func() { done <- runCLI(t, nil, "", args...) }()
	return done
}

func wait(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("weir sql did not end")
		return result{}
	}
}

func TestSQLSelectStopsAtLimit(t *testing.T) {
	f, addr := startSQLFake(t)
	done := runAsync(t, "--jobmanager", addr, "sql", "--collect-address", "127.0.0.1:0", "-e", sqlSource+"SELECT k, v FROM s WHERE v < 10 LIMIT 3;")
	g := f.graph(t)
	if !strings.Contains(g.GetSql(), "SELECT k, v FROM s WHERE v < 10 LIMIT 3") {
		t.Errorf("the job's sql = %q, want its statement", g.GetSql())
	}
	a := newSubtask(t, g, 0)
	// Whatever comes after the third row is not printed, and the
	// subtasks are told the client has enough.
	a.send([2]int64{0, 0}, [2]int64{1, 1}, [2]int64{2, 2}, [2]int64{3, 3})
	for a.send([2]int64{4, 4}) {
		time.Sleep(10 * time.Millisecond)
	}
	r := wait(t, done)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if r.stdout != "           k             v\n------------  ------------\n           0             0\n           1             1\n           2             2\n(3 rows)\n" {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	if r.stderr != "select-1: job-select-1\n" {
		t.Errorf("stderr = %q, want the job's ID alone", r.stderr)
	}
	if !f.wasCancelled("job-select-1") {
		t.Error("the job was not cancelled at its LIMIT")
	}
	if _, err := a.stream.CloseAndRecv(); err != nil {
		t.Errorf("the stream of a subtask past the LIMIT ended with %v, want OK", err)
	}
}

func TestSQLSelectUntilTheJobFinishes(t *testing.T) {
	f, addr := startSQLFake(t)
	done := runAsync(t, "--jobmanager", addr, "sql", "--collect-address", "127.0.0.1:0", "-o", "csv", "-e", sqlSource+"SELECT k, v FROM s WHERE v < 2;")
	g := f.graph(t)
	a, b := newSubtask(t, g, 0), newSubtask(t, g, 1)
	a.send([2]int64{0, 0}, [2]int64{1, 1})
	b.send([2]int64{2, 2})
	a.end()
	b.end()
	f.set("job-select-1", func(j *weirv1.JobInfo) { j.State = weirv1.JobState_JOB_STATE_FINISHED })
	r := wait(t, done)
	lines := strings.Split(r.stdout, "\n")
	// Each subtask's rows in order; the subtasks' interleaved.
	if r.code != 0 || len(lines) != 5 || lines[0] != "k,v" || !slices.Equal(slices.Sorted(slices.Values(lines[1:4])), []string{"0,0", "1,1", "2,2"}) ||
		slices.Index(lines, "0,0") > slices.Index(lines, "1,1") {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if f.wasCancelled("job-select-1") {
		t.Error("a finished job was cancelled")
	}
}

func TestSQLSelectWatchesTheJob(t *testing.T) {
	t.Run("restart", func(t *testing.T) {
		f, addr := startSQLFake(t)
		done := runAsync(t, "--jobmanager", addr, "sql", "--collect-address", "127.0.0.1:0", "-e", sqlSource+"SELECT k, v FROM s LIMIT 1;")
		g := f.graph(t)
		f.set("job-select-1", func(j *weirv1.JobInfo) { j.Restarts, j.FailureCause = 1, "lost TaskManager tm-2" })
		time.Sleep(2 * jobPollInterval)
		newSubtask(t, g, 0).send([2]int64{7, 7})
		r := wait(t, done)
		if r.code != 0 || !strings.Contains(r.stderr, "job job-select-1 restarted (lost TaskManager tm-2): rows since its last checkpoint may print again") {
			t.Errorf("exit %d, stderr %q; want the restart and its consequence", r.code, r.stderr)
		}
	})
	t.Run("rows cannot reach the client", func(t *testing.T) {
		f, addr := startSQLFake(t)
		done := runAsync(t, "--jobmanager", addr, "sql", "--collect-address", "127.0.0.1:0", "-e", sqlSource+"SELECT k, v FROM s;")
		f.graph(t)
		f.set("job-select-1", func(j *weirv1.JobInfo) {
			j.Restarts, j.FailureCause = 1, "task: sql-collect: cannot reach the client at 10.9.9.9:4000: connection refused"
		})
		r := wait(t, done)
		if r.code != 1 || !strings.Contains(r.stderr, "weir: job job-select-1 cannot send its rows here (task: sql-collect: cannot reach") {
			t.Errorf("exit %d, stderr %q; want the failure", r.code, r.stderr)
		}
		if !f.wasCancelled("job-select-1") {
			t.Error("the job was left restarting")
		}
	})
	t.Run("failed", func(t *testing.T) {
		f, addr := startSQLFake(t)
		done := runAsync(t, "--jobmanager", addr, "sql", "--collect-address", "127.0.0.1:0", "-e", sqlSource+"SELECT k, v FROM s;")
		f.graph(t)
		f.set("job-select-1", func(j *weirv1.JobInfo) {
			j.State, j.FailureCause = weirv1.JobState_JOB_STATE_FAILED, "division by zero\n  at calc-1"
		})
		r := wait(t, done)
		if r.code != 1 || !strings.Contains(r.stderr, "weir: job job-select-1 failed: division by zero") {
			t.Errorf("exit %d, stderr %q; want the failure", r.code, r.stderr)
		}
	})
}

// TestSQLSinksFirst: every statement compiles before anything is
// submitted; the sinks' jobs go first, then the SELECTs run.
func TestSQLSinksFirst(t *testing.T) {
	f, addr := startSQLFake(t)
	script := sqlSource + "SELECT k FROM s LIMIT 0;\nCREATE SINK a AS SELECT k, v FROM s WHERE v > 3 WITH (connector='blackhole');\nINSERT INTO b SELECT k FROM s;\n"
	r := runCLI(t, nil, "", "--jobmanager", addr, "sql", "-e", script)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "<command-line>:4:13: relation \"b\" does not exist") {
		t.Errorf("exit %d, stderr %q; want the error where it is", r.code, r.stderr)
	}
	if len(f.graphs) != 0 {
		t.Fatal("a job was submitted from a script with an error")
	}

	path := filepath.Join(t.TempDir(), "script.sql")
	if err := os.WriteFile(path, []byte(strings.Replace(script, "INSERT INTO b SELECT k FROM s;\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "", "--jobmanager", addr, "sql", "-f", path, "-p", "3")
	if r.code != 0 || r.stdout != "a: job-a\n           k\n------------\n(0 rows)\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	g := f.graph(t)
	if g.GetName() != "a" || !strings.HasPrefix(g.GetSql(), "CREATE SINK a AS SELECT") {
		t.Errorf("submitted %s with sql %q, want sink a's job", g.GetName(), g.GetSql())
	}
	for _, v := range g.GetVertices() {
		if v.GetParallelism() != 3 {
			t.Errorf("vertex %s has parallelism %d, want -p's 3", v.GetName(), v.GetParallelism())
		}
	}
	if len(f.graphs) != 0 {
		t.Error("a SELECT with LIMIT 0 ran a job")
	}

	r = runCLI(t, nil, "", "--jobmanager", addr, "sql", "-f", path+".missing")
	if r.code != 1 || !strings.Contains(r.stderr, "weir: read SQL script: open "+path+".missing") {
		t.Errorf("missing file: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, "SELECT 1 FROM;", "--jobmanager", addr, "sql", "-f", "-")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "<stdin>:1:") {
		t.Errorf("stdin: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestSQLExplain(t *testing.T) {
	r := runCLI(t, nil, "", "--jobmanager", closedAddr(t), "sql", "explain", "-e",
		sqlSource+"SELECT k, v FROM s WHERE v < 10 LIMIT 5;\nCREATE SINK a AS SELECT k FROM s WITH (connector='blackhole');")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{
		"== select-1 ==\nSELECT k, v FROM s WHERE v < 10 LIMIT 5\n\n-- Logical plan\n",
		"\n-- Physical plan\n", "[sql-collect]", "\n-- Job graph\nname: select-1\n",
		"\n\n== a ==\nCREATE SINK a AS SELECT k FROM s WITH (connector='blackhole')\n", "[blackhole]",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("explain lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestSQLUsageErrors(t *testing.T) {
	addr := closedAddr(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"sql"}, "weir: give the script with -f FILE (- for stdin) or -e SQL"},
		{[]string{"sql", "-f", "a.sql", "-e", "SELECT 1"}, "weir: give the script with -f or with -e, not both"},
		{[]string{"sql", "explian", "-e", "SELECT 1"}, `weir: unknown command "explian" for "weir sql"`},
		{[]string{"sql", "-o", "json", "-e", "SELECT 1"}, `weir: invalid output format "json" (want table or csv)`},
		{[]string{"sql", "-p", "0", "-e", "SELECT 1"}, "weir: --parallelism must be at least 1, got 0"},
	} {
		r := runCLI(t, nil, "", append([]string{"--jobmanager", addr}, tt.args...)...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, exitUsage, tt.want)
		}
	}
}
