package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/jobgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// fakeJobManager serves ClientService from memory.
type fakeJobManager struct {
	weirv1grpc.UnimplementedClientServiceServer

	mu        sync.Mutex
	submitted []*weirv1.JobGraph
	jobs      []*weirv1.JobInfo
	stopReq   *weirv1.StopWithSavepointRequest
}

func (f *fakeJobManager) SubmitJob(_ context.Context, req *weirv1.SubmitJobRequest) (*weirv1.SubmitJobResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submitted = append(f.submitted, req.GetJob())
	return &weirv1.SubmitJobResponse{JobId: "job-1"}, nil
}

func (f *fakeJobManager) ListJobs(context.Context, *weirv1.ListJobsRequest) (*weirv1.ListJobsResponse, error) {
	return &weirv1.ListJobsResponse{Jobs: f.jobs}, nil
}

func (f *fakeJobManager) GetJob(_ context.Context, req *weirv1.GetJobRequest) (*weirv1.GetJobResponse, error) {
	for _, j := range f.jobs {
		if j.GetId() == req.GetJobId() {
			return &weirv1.GetJobResponse{Job: j}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "no job %s", req.GetJobId())
}

func (f *fakeJobManager) GetAutoscaler(_ context.Context, req *weirv1.GetAutoscalerRequest) (*weirv1.GetAutoscalerResponse, error) {
	if req.GetJobId() != "job-a" {
		return nil, status.Errorf(codes.NotFound, "no job %s", req.GetJobId())
	}
	return &weirv1.GetAutoscalerResponse{Enabled: true, History: []*weirv1.AutoscalerEntry{
		{TimeMs: 1_700_000_000_000, Kind: "rescaled", Reason: "work 1 → 4 (utilization 1.61)", Parallelism: map[string]int32{"work": 4}},
		sampleJob().GetAutoscaler(),
	}}, nil
}

func (f *fakeJobManager) CancelJob(_ context.Context, req *weirv1.CancelJobRequest) (*weirv1.CancelJobResponse, error) {
	return nil, status.Error(codes.FailedPrecondition, "job is already FINISHED")
}

func (f *fakeJobManager) TriggerCheckpoint(_ context.Context, req *weirv1.TriggerCheckpointRequest) (*weirv1.TriggerCheckpointResponse, error) {
	return &weirv1.TriggerCheckpointResponse{CheckpointId: 7, ExternalPath: "/tmp/weir/" + req.GetJobId() + "/chk-7"}, nil
}

func (f *fakeJobManager) StopWithSavepoint(_ context.Context, req *weirv1.StopWithSavepointRequest) (*weirv1.StopWithSavepointResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopReq = req
	return &weirv1.StopWithSavepointResponse{CheckpointId: 9, ExternalPath: req.GetTargetDirectory() + "/savepoint-9"}, nil
}

func (f *fakeJobManager) RescaleJob(_ context.Context, req *weirv1.RescaleJobRequest) (*weirv1.RescaleJobResponse, error) {
	if len(req.GetParallelism()) != 2 || req.GetParallelism()["sum"] != 4 || req.GetParallelism()["sink"] != 1 {
		return nil, status.Errorf(codes.InvalidArgument, "unexpected parallelism %v", req.GetParallelism())
	}
	return &weirv1.RescaleJobResponse{CheckpointId: 12}, nil
}

func (f *fakeJobManager) ConfigureCheckpointing(_ context.Context, req *weirv1.ConfigureCheckpointingRequest) (*weirv1.ConfigureCheckpointingResponse, error) {
	if req.GetTimeout() != nil {
		return nil, status.Error(codes.InvalidArgument, "only interval and min-pause were given")
	}
	return &weirv1.ConfigureCheckpointingResponse{Checkpointing: &weirv1.CheckpointConfig{
		Interval: req.GetInterval(), MinPause: req.GetMinPause(), Timeout: durationpb.New(time.Minute),
	}}, nil
}

func (f *fakeJobManager) ListCheckpoints(context.Context, *weirv1.ListCheckpointsRequest) (*weirv1.ListCheckpointsResponse, error) {
	return sampleCheckpoints(), nil
}

func startFake(t *testing.T) (*fakeJobManager, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeJobManager{jobs: []*weirv1.JobInfo{sampleJob()}}
	srv := grpc.NewServer()
	weirv1grpc.RegisterClientServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f, lis.Addr().String()
}

// closedAddr returns an address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

type result struct {
	stdout, stderr string
	code           int
}

func runCLI(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	lookup := func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut, lookup)
	return result{out.String(), errOut.String(), code}
}

func TestUnreachableJobManager(t *testing.T) {
	addr := closedAddr(t)
	for _, args := range [][]string{
		{"job", "list"},
		{"job", "get", "abc", "-o", "json"},
		{"checkpoint", "trigger", "abc"},
	} {
		start := time.Now()
		r := runCLI(t, nil, "", append([]string{"--jobmanager", addr, "--timeout", "5s"}, args...)...)
		if r.code == 0 {
			t.Errorf("%v: exit code 0, want non-zero", args)
		}
		if want := "weir: cannot reach JobManager at " + addr + ": "; !strings.HasPrefix(r.stderr, want) {
			t.Errorf("%v: stderr = %q, want prefix %q", args, r.stderr, want)
		}
		if r.stdout != "" {
			t.Errorf("%v: stdout = %q, want nothing", args, r.stdout)
		}
		// WaitForReady(false) must fail fast instead of waiting out --timeout.
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("%v: took %s to report an unreachable JobManager", args, d)
		}
	}
}

func TestJobManagerAddressFromEnv(t *testing.T) {
	_, addr := startFake(t)
	closed := closedAddr(t)

	r := runCLI(t, map[string]string{envJobManager: addr}, "", "job", "get", "job-a", "-o", "json")
	if r.code != 0 {
		t.Fatalf("with %s set: exit %d, stderr %q", envJobManager, r.code, r.stderr)
	}

	r = runCLI(t, map[string]string{envJobManager: addr}, "", "--jobmanager", closed, "job", "list")
	if r.code == 0 || !strings.Contains(r.stderr, closed) {
		t.Errorf("explicit --jobmanager must beat %s: exit %d, stderr %q", envJobManager, r.code, r.stderr)
	}

	r = runCLI(t, map[string]string{envJobManager: closed}, "", "--jobmanager", addr, "job", "list")
	if r.code != 0 {
		t.Errorf("explicit --jobmanager must beat %s: exit %d, stderr %q", envJobManager, r.code, r.stderr)
	}

	r = runCLI(t, map[string]string{envJobManager: closed}, "", "job", "list")
	if r.code == 0 || !strings.Contains(r.stderr, "cannot reach JobManager at "+closed) {
		t.Errorf("env address not used: exit %d, stderr %q", r.code, r.stderr)
	}
}

const smallSpec = `name: small
vertices:
  - {name: src, operator: sequence-source, parallelism: 2}
  - {name: out, operator: print, parallelism: 2, inputs: [{from: src, partition: forward}]}
`

func TestSubmitPrintsJobIDOnly(t *testing.T) {
	f, addr := startFake(t)
	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte(smallSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "", "--jobmanager", addr, "job", "submit", "-f", path, "--from-savepoint", "/tmp/sp-3")
	if r.code != 0 || r.stdout != "job-1\n" || r.stderr != "" {
		t.Fatalf("submit: exit %d, stdout %q, stderr %q; want job-1 alone", r.code, r.stdout, r.stderr)
	}
	want, err := jobgraph.ParseSpec([]byte(smallSpec))
	if err != nil {
		t.Fatal(err)
	}
	want.RestoreFrom = "/tmp/sp-3"
	if len(f.submitted) != 1 || !proto.Equal(f.submitted[0], want) {
		t.Errorf("submitted %v, want %v", f.submitted, want)
	}

	r = runCLI(t, nil, smallSpec, "--jobmanager", addr, "job", "submit", "-f", "-")
	if r.code != 0 || r.stdout != "job-1\n" {
		t.Errorf("submit from stdin: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestSubmitInvalidSpec(t *testing.T) {
	f, addr := startFake(t)
	path := filepath.Join(t.TempDir(), "bad.yaml")
	spec := strings.Replace(smallSpec, "from: src", "from: nope", 1)
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "", "--jobmanager", addr, "job", "submit", "-f", path)
	want := `weir: invalid job spec ` + path + `: line 4: vertices[1].inputs[0].from: unknown vertex "nope"`
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
	}
	if len(f.submitted) != 0 {
		t.Errorf("an invalid spec reached the JobManager")
	}

	r = runCLI(t, nil, "", "--jobmanager", addr, "job", "submit", "-f", filepath.Join(t.TempDir(), "missing.yaml"))
	if r.code != 1 || !strings.Contains(r.stderr, "missing.yaml") {
		t.Errorf("missing file: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestCommandsAgainstFake(t *testing.T) {
	f, addr := startFake(t)
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string // exact, unless empty
		stdoutHas  []string
		stderrWant string // exact
	}{
		{name: "get unknown job", args: []string{"job", "get", "nope"}, code: 1, stderrWant: "weir: job nope not found\n"},
		{name: "checkpoint list of unknown job", args: []string{"job", "cancel", "job-a"}, code: 1,
			stderrWant: "weir: cancel job job-a: job is already FINISHED\n"},
		{name: "trigger checkpoint", args: []string{"checkpoint", "trigger", "job-a"}, stdout: "7\t/tmp/weir/job-a/chk-7\n"},
		{name: "stop with savepoint", args: []string{"job", "stop", "job-a", "--savepoint-dir", "/sp", "--drain"},
			stdout: "9\t/sp/savepoint-9\n"},
		{name: "rescale", args: []string{"job", "rescale", "job-a", "--parallelism", "sum=4", "--parallelism", "sink=1"},
			stdout: "Job job-a rescaling from checkpoint 12.\n"},
		{name: "rescale without parallelism", args: []string{"job", "rescale", "job-a"}, code: 2,
			stderrWant: "weir: --parallelism VERTEX=N is required\nRun 'weir job rescale --help' for usage.\n"},
		{name: "rescale to zero", args: []string{"job", "rescale", "job-a", "--parallelism", "sum=0"}, code: 2,
			stderrWant: "weir: --parallelism sum=0: parallelism must be at least 1\nRun 'weir job rescale --help' for usage.\n"},
		{name: "configure checkpointing", args: []string{"checkpoint", "configure", "job-a", "--interval", "5s", "--min-pause", "0s"},
			stdout: "Checkpointing of job job-a: interval 5s, timeout 1m0s, min-pause 0s.\n"},
		{name: "configure nothing", args: []string{"checkpoint", "configure", "job-a"}, code: 2,
			stderrWant: "weir: give at least one of --interval, --checkpoint-timeout, --min-pause, --interval-during-backlog\nRun 'weir checkpoint configure --help' for usage.\n"},
		{name: "exceptions newest first", args: []string{"job", "exceptions", "job-a"},
			stdoutHas: []string{"TIME                 TASK          TASKMANAGER  RESTARTED    CAUSE",
				"too many failed checkpoints\n", "source (1/2)  tm-0         regions [0]  taskmanager tm-0 lost"}},
		{name: "unimplemented", args: []string{"taskmanager", "list"}, code: 1,
			stderrWant: "weir: list taskmanagers: not supported by the JobManager at " + addr + ": method ListTaskManagers not implemented\n"},
		{name: "job list table", args: []string{"job", "list"},
			stdoutHas: []string{"ID     NAME         STATE    START", "job-a  running-sum  RUNNING  "}},
		{name: "job autoscaler table", args: []string{"job", "autoscaler", "job-a"},
			stdoutHas: []string{"DECISION", "rescaled   work 1 → 4 (utilization 1.61)", "6      no-change  every vertex is within its target utilization"}},
		{name: "job autoscaler of unknown job", args: []string{"job", "autoscaler", "nope"}, code: 1, stderrWant: "weir: job nope not found\n"},
		{name: "job get table", args: []string{"job", "get", "job-a"},
			stdoutHas: []string{"State:       RUNNING", "no-change: every vertex is within its target utilization", "VERTEX  OPERATOR         PARALLELISM  SUBTASK  ATTEMPT  STATE    TASKMANAGER  REGION",
				"source  sequence-source  2            1        0        RUNNING  tm-2         0"}},
		{name: "checkpoint list table", args: []string{"checkpoint", "list", "job-a"},
			stdoutHas: []string{"Counts:            5 total, 1 in progress, 3 completed, 1 failed, 1 restored",
				"ID  TYPE        STATUS       TRIGGERED", "COMPLETED", "4/4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, nil, "", append([]string{"--jobmanager", addr}, tt.args...)...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, tt.code, r.stderr)
			}
			if tt.stdout != "" && r.stdout != tt.stdout {
				t.Errorf("stdout %q, want %q", r.stdout, tt.stdout)
			}
			for _, s := range tt.stdoutHas {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
				}
			}
			if tt.code != 0 && r.stderr != tt.stderrWant {
				t.Errorf("stderr %q, want %q", r.stderr, tt.stderrWant)
			}
		})
	}
	if f.stopReq == nil || !f.stopReq.GetDrain() || f.stopReq.GetTargetDirectory() != "/sp" {
		t.Errorf("stop request = %v", f.stopReq)
	}
}

func TestJobListJSONIsArray(t *testing.T) {
	_, addr := startFake(t)
	r := runCLI(t, nil, "", "--jobmanager", addr, "job", "list", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var jobs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil {
		t.Fatalf("job list -o json is not a JSON array: %v\n%s", err, r.stdout)
	}
	if len(jobs) != 1 || jobs[0]["id"] != "job-a" || jobs[0]["state"] != "RUNNING" {
		t.Errorf("jobs = %v", jobs)
	}
}

func TestUsageErrors(t *testing.T) {
	addr := closedAddr(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"job", "get"}, "weir: weir job get needs 1 argument(s): JOB_ID; got 0"},
		{[]string{"job", "list", "-o", "yaml"}, `weir: invalid output format "yaml" (want table or json)`},
		{[]string{"job", "lst"}, `weir: unknown command "lst" for "weir job"`},
		{[]string{"jobs"}, `weir: unknown command "jobs" for "weir"`},
		{[]string{"job", "submit"}, `weir: required flag(s) "file" not set`},
		{[]string{"job", "stop", "x"}, `weir: required flag(s) "savepoint-dir" not set`},
		{[]string{"job", "list", "--bogus"}, "weir: unknown flag: --bogus"},
		{[]string{"checkpoint", "get", "x", "seven"}, `weir: CHECKPOINT_ID must be a checkpoint number, got "seven"`},
		{[]string{"--timeout", "0s", "job", "list"}, "weir: --timeout must be positive, got 0s"},
	}
	for _, tt := range tests {
		r := runCLI(t, nil, "", append([]string{"--jobmanager", addr}, tt.args...)...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, tt.want) || !strings.Contains(r.stderr, "--help' for usage") {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, exitUsage, tt.want)
		}
	}
	if r := runCLI(t, nil, "", "--help"); r.code != 0 || !strings.Contains(r.stdout, "weir submits jobs") {
		t.Errorf("--help: exit %d, stdout %q", r.code, r.stdout)
	}
}
