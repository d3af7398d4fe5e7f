package weir_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/jobmanager"
	"github.com/weirproject/weir/internal/operators"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/taskmanager"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// runJob runs j on an in-process cluster (a JobManager and two
// TaskManagers whose operators are j's own, as `prog taskmanager` has
// them), submits it the way `prog submit` does and waits for it to end.
func runJob(t *testing.T, j *weir.Job) *weirv1.JobInfo {
	t.Helper()
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	rpcAddr := freeAddr(t)
	jm, err := jobmanager.New(jobmanager.Config{RPCAddr: rpcAddr, HTTPAddr: freeAddr(t), CheckpointDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	go func() { done <- jm.Run(ctx) }()
	for i := range 2 {
		reg := j.Registry()
		operators.Register(reg)
		cfg := taskmanager.Config{
			ID: fmt.Sprintf("tm-%d", i), JobManager: rpcAddr, RPCAddr: freeAddr(t), HTTPAddr: freeAddr(t),
			Slots: 2, Operators: reg, Logger: log, StateDir: t.TempDir(),
		}
		go func() { done <- taskmanager.Run(ctx, cfg) }()
	}
	defer func() {
		cancel()
		for range 3 {
			if err := <-done; err != nil {
				t.Errorf("daemon: %v", err)
			}
		}
	}()
	var out, errOut bytes.Buffer
	if code := weir.Run(j, []string{"submit", "--jobmanager", rpcAddr}, &out, &errOut); code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut.String())
	}
	id := strings.TrimSpace(out.String())
	conn, err := grpc.NewClient(rpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := weirv1.NewClientServiceClient(conn)
	var info *weirv1.JobInfo
	poll.Until(t, 2*time.Minute, 50*time.Millisecond, "job "+id+" to end", func() (bool, string) {
		resp, err := client.GetJob(context.Background(), &weirv1.GetJobRequest{JobId: id})
		if err != nil {
			return false, err.Error()
		}
		info = resp.GetJob()
		switch info.GetState() {
		case weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED:
			return true, ""
		}
		return false, info.GetState().String()
	})
	if info.GetState() != weirv1.JobState_JOB_STATE_FINISHED {
		t.Fatalf("job ended %s: %s", info.GetState(), info.GetFailureCause())
	}
	return info
}

var words = []string{"stream", "weir", "flink", "barrier", "checkpoint", "window", "state", "key"}

func sentence(i int64) string {
	return fmt.Sprintf("%s %s %s", words[i%8], words[(i/8)%8], words[(i*3)%8])
}

type wordCount struct {
	Word  string
	Count int64
}

// Word count over a generated text, every running count committed once.
func TestWordCount(t *testing.T) {
	const n = 3000
	out := filepath.Join(t.TempDir(), "out")
	job := weir.NewJob("word-count", weir.Checkpointing(100*time.Millisecond))
	lines := weir.FromSource(job, "lines", weir.Generate(n, sentence, weir.Rate(20000)), weir.Parallelism(2))
	ws := weir.FlatMap(lines, "words", func(l string, emit func(wordCount)) {
		for _, w := range strings.Fields(l) {
			emit(wordCount{Word: w, Count: 1})
		}
	}, weir.Parallelism(2))
	counts := weir.Reduce(weir.KeyBy(ws, func(w wordCount) string { return w.Word }), "counts",
		func(a, b wordCount) wordCount { return wordCount{Word: a.Word, Count: a.Count + b.Count} }, weir.Parallelism(2))
	weir.SinkTo(counts, "sink", weir.FileSink(out, func(w wordCount) string { return fmt.Sprintf("%s,%d", w.Word, w.Count) }), weir.Parallelism(2))
	runJob(t, job)

	lines2, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	// The same computation in plain Go: every word's running counts.
	want := map[string]int64{}
	for i := range int64(n) {
		for _, w := range strings.Fields(sentence(i)) {
			want[w]++
		}
	}
	got := map[string][]int64{}
	for _, l := range lines2 {
		w, c, _ := strings.Cut(l, ",")
		v, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			t.Fatalf("line %q", l)
		}
		got[w] = append(got[w], v)
	}
	for w, total := range want {
		cs := got[w]
		slices.Sort(cs)
		if int64(len(cs)) != total || cs[0] != 1 || cs[len(cs)-1] != total {
			t.Fatalf("word %q: %d running counts from %v to %v, want 1..%d once each", w, len(cs), cs[0], cs[len(cs)-1], total)
		}
		for i, c := range cs {
			if c != int64(i+1) {
				t.Fatalf("word %q: running count %d missing or repeated", w, i+1)
			}
		}
	}
}
