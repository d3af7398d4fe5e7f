package filesink

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/blob/blobtest"
	"github.com/weirproject/weir/internal/blob/s3blob"
	"github.com/weirproject/weir/internal/sdktest"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// sinkEnv is where a test's file-sink writes: a local directory or an S3
// prefix, with what the test needs to look at the output.
type sinkEnv struct {
	kind string // local, gofakes3, versitygw
	loc  string
	// S3 only
	srv      *blobtest.Server
	mp       multipartStore // what the sinks use (nil: built from S3Config)
	client   *minioMultipart
	bucket   string
	prefix   string
	partSize int
}

func localEnv(t *testing.T) *sinkEnv {
	return &sinkEnv{kind: "local", loc: t.TempDir()}
}

// useS3 points blob.Default and S3Config at srv until the test ends.
func useS3(t *testing.T, srv *blobtest.Server) {
	t.Helper()
	st, err := s3blob.New(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	oldStore, oldConfig := blob.Default.S3, S3Config
	blob.Default.S3 = st
	S3Config = func() (blob.S3Config, bool) { return srv.Config, true }
	t.Cleanup(func() { blob.Default.S3, S3Config = oldStore, oldConfig })
}

var bucketSeq struct {
	sync.Mutex
	n int
}

// s3Env makes a fresh bucket on srv; the sinks write under a prefix of
// it. partSize 0 is the real one.
func s3Env(t *testing.T, kind string, srv *blobtest.Server, partSize int) *sinkEnv {
	t.Helper()
	bucketSeq.Lock()
	bucketSeq.n++
	bucket := fmt.Sprintf("sink-%d", bucketSeq.n)
	bucketSeq.Unlock()
	srv.MakeBucket(t, bucket)
	useS3(t, srv)
	client, err := newMinioMultipart(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &sinkEnv{kind: kind, loc: "s3://" + bucket + "/job/out", srv: srv, client: client, bucket: bucket, prefix: "job/out/", partSize: partSize}
}

func (e *sinkEnv) isS3() bool { return e.kind != "local" }

// newSink is an unopened sink of the environment.
func (e *sinkEnv) newSink(clock func() time.Time) *FileSink {
	return &FileSink{mp: e.mp, partSize: e.partSize, now: clock}
}

// committed returns the committed files with their lines.
func (e *sinkEnv) committed(t *testing.T) map[string][]string {
	t.Helper()
	if !e.isS3() {
		visible, _ := listDir(t, e.loc)
		return visible
	}
	ctx := context.Background()
	out := map[string][]string{}
	for info, err := range blob.Default.S3.List(ctx, e.loc) {
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(info.Location, e.loc+"/")
		if strings.HasPrefix(name, ".") {
			continue
		}
		r, err := blob.Default.S3.Get(ctx, info.Location)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[name] = lines(b)
	}
	return out
}

// uncommitted returns the uncommitted files: hidden files (without their
// run token), or the names of the incomplete uploads.
func (e *sinkEnv) uncommitted(t *testing.T) []string {
	t.Helper()
	if !e.isS3() {
		_, hidden := listDir(t, e.loc)
		return hidden
	}
	ups, err := e.client.listUploads(context.Background(), e.bucket, e.prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range ups {
		out = append(out, strings.TrimPrefix(u.Key, e.prefix))
	}
	slices.Sort(out)
	return out
}

// clock is a fake clock for max-age.
type clock struct{ t time.Time }

func newClock() *clock               { return &clock{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)} }
func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }

// envSink is one subtask of a sink in an environment.
type envSink struct {
	*sinkSubtask
}

func (e *sinkEnv) open(t *testing.T, cfg sdk.Config, c *clock, subtask, parallelism int) *envSink {
	t.Helper()
	ctx := sdktest.NewContext("sink", cfg, subtask, parallelism)
	return e.openCtx(t, c, ctx)
}

func (e *sinkEnv) openCtx(t *testing.T, c *clock, ctx *sdktest.Context) *envSink {
	t.Helper()
	s := e.newSink(c.now)
	if err := s.Open(ctx); err != nil {
		t.Fatalf("open file-sink subtask %d: %v", ctx.SubtaskIndex(), err)
	}
	return &envSink{sinkSubtask: &sinkSubtask{ctx: ctx, sink: s}}
}

// restore opens a new attempt of subtask from the states of checkpoint id.
func (e *sinkEnv) restore(t *testing.T, cfg sdk.Config, c *clock, subtask, parallelism, attempt int, id int64, prev []*weirv1.SubtaskState) *envSink {
	t.Helper()
	return e.openCtx(t, c, sdktest.Restore(t, "sink", cfg, subtask, parallelism, attempt, id, prev))
}

// sinkConfig is a file-sink config of loc with roll (nil: none).
func sinkConfig(loc string, roll map[string]any) sdk.Config {
	cfg := sdk.Config{"path": loc}
	if roll != nil {
		cfg["roll"] = roll
	}
	return cfg
}
