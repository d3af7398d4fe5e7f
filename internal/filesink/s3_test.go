package filesink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/blob/blobtest"
	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/sdktest"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// faultyStore wraps the multipart API of a test: a failure injected into
// the next calls of an operation, or a deliberately broken behaviour.
type faultyStore struct {
	multipartStore
	core *minio.Core

	mu sync.Mutex
	// failAfter[op] > 0 lets that many calls of op (start, part,
	// complete) succeed, then fails the next one; 0 fails nothing.
	failAfter map[string]int
	calls     map[string]int

	// Broken behaviours, for runs the checker must reject.
	copyOnComplete  bool // a commit also copies the object to <key>-copy
	completeOnAbort bool // a restore completes stale uploads instead of aborting them
	dropOnComplete  bool // a commit aborts the upload instead of completing it
}

var errInjected = errors.New("injected S3 failure")

func newFaultyStore(env *sinkEnv) *faultyStore {
	return &faultyStore{multipartStore: env.client, core: env.client.core, failAfter: map[string]int{}, calls: map[string]int{}}
}

// failNext fails the call of op after n more successful ones.
func (s *faultyStore) failNext(op string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op] = 0
	s.failAfter[op] = n + 1
}

func (s *faultyStore) check(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAfter[op] == 0 {
		return nil
	}
	s.calls[op]++
	if s.calls[op] == s.failAfter[op] {
		s.failAfter[op] = 0
		return fmt.Errorf("%s: %w", op, errInjected)
	}
	return nil
}

func (s *faultyStore) startUpload(ctx context.Context, bucket, key string) (string, error) {
	if err := s.check("start"); err != nil {
		return "", err
	}
	return s.multipartStore.startUpload(ctx, bucket, key)
}

func (s *faultyStore) uploadPart(ctx context.Context, bucket, key, uploadID string, n int, data []byte) (string, error) {
	if err := s.check("part"); err != nil {
		return "", err
	}
	return s.multipartStore.uploadPart(ctx, bucket, key, uploadID, n, data)
}

func (s *faultyStore) completeUpload(ctx context.Context, bucket, key, uploadID string, parts []s3Part) error {
	if err := s.check("complete"); err != nil {
		return err
	}
	if s.dropOnComplete {
		return s.multipartStore.abortUpload(ctx, bucket, key, uploadID)
	}
	if err := s.multipartStore.completeUpload(ctx, bucket, key, uploadID, parts); err != nil {
		return err
	}
	if s.copyOnComplete {
		_, err := s.core.CopyObject(ctx, bucket, key, bucket, key+"-copy", nil, minio.CopySrcOptions{Bucket: bucket, Object: key}, minio.PutObjectOptions{})
		return err
	}
	return nil
}

func (s *faultyStore) abortUpload(ctx context.Context, bucket, key, uploadID string) error {
	if s.completeOnAbort {
		parts, err := s.listParts(ctx, bucket, key, uploadID)
		if err != nil {
			return err
		}
		if len(parts) > 0 {
			return s.multipartStore.completeUpload(ctx, bucket, key, uploadID, parts)
		}
	}
	return s.multipartStore.abortUpload(ctx, bucket, key, uploadID)
}

// runningSums is the output of a running sum over sequence-source records
// i in [0, count) with key i mod keys, as check.RunningSum expects it:
// line i is "<key>,<sum of the key's records up to i>".
func runningSums(count, keys int64) []string {
	sums := make([]int64, keys)
	out := make([]string, count)
	for i := range count {
		sums[i%keys] += i
		out[i] = fmt.Sprintf("%d,%d", i%keys, sums[i%keys])
	}
	return out
}

// sumJob plays sources and sinks: source s (of sources) emits the lines
// i ≡ s (mod sources) in order, into sink subtask s mod len(sinks);
// positions are checkpointed with the sinks and rewound on restore, so
// records after the restored checkpoint are replayed as a restored source
// does.
type sumJob struct {
	t       *testing.T
	env     *sinkEnv
	cfg     sdk.Config
	lines   []string
	sources int
	sinks   []*envSink
	pos     []int // next index of each source's sequence
	saved   map[int64]savedCheckpoint
	chk     string
	attempt int
}

type savedCheckpoint struct {
	states []*weirv1.SubtaskState
	pos    []int
}

func newSumJob(t *testing.T, env *sinkEnv, roll map[string]any, count int64, parallelism int) *sumJob {
	j := &sumJob{t: t, env: env, cfg: sinkConfig(env.loc, roll), lines: runningSums(count, 7), sources: parallelism,
		pos: make([]int, parallelism), saved: map[int64]savedCheckpoint{}, chk: t.TempDir()}
	for i := range parallelism {
		j.sinks = append(j.sinks, env.open(t, j.cfg, newClock(), i, parallelism))
	}
	return j
}

// emit writes up to n more records of every source; the first error
// (an injected failure) is returned.
func (j *sumJob) emit(n int) error {
	for s := range j.sources {
		sink := j.sinks[s%len(j.sinks)]
		for range n {
			i := j.pos[s]*j.sources + s
			if i >= len(j.lines) {
				break
			}
			key, sum, _ := strings.Cut(j.lines[i], ",")
			if err := sink.ctx.Process(j.t, sink.sink, sdk.Record{Key: []byte(key), Value: []byte(sum)}, nil); err != nil {
				return err
			}
			j.pos[s]++
		}
	}
	return nil
}

func (j *sumJob) mustEmit(n int) {
	j.t.Helper()
	if err := j.emit(n); err != nil {
		j.t.Fatal(err)
	}
}

func (j *sumJob) checkpoint(id int64) {
	j.t.Helper()
	var states []*weirv1.SubtaskState
	for _, s := range j.sinks {
		states = append(states, s.ctx.Checkpoint(j.t, s.sink, j.chk, id))
	}
	j.saved[id] = savedCheckpoint{states: states, pos: slices.Clone(j.pos)}
}

func (j *sumJob) complete(id int64) {
	j.t.Helper()
	for _, s := range j.sinks {
		s.complete(j.t, id)
	}
}

// restore crashes every sink subtask (no Close) and restores checkpoint
// id at parallelism p; the sources rewind.
func (j *sumJob) restore(id int64, p int) {
	j.t.Helper()
	j.attempt++
	saved := j.saved[id]
	j.sinks = nil
	for i := range p {
		j.sinks = append(j.sinks, j.env.restore(j.t, j.cfg, newClock(), i, p, j.attempt, id, saved.states))
	}
	j.pos = slices.Clone(saved.pos)
}

// finish emits the rest and ends the input: the final checkpoint id
// commits everything.
func (j *sumJob) finish(id int64) {
	j.t.Helper()
	j.mustEmit(len(j.lines))
	for _, s := range j.sinks {
		if err := s.sink.EndInput(nil); err != nil {
			j.t.Fatal(err)
		}
	}
	j.checkpoint(id)
	j.complete(id)
	for _, s := range j.sinks {
		if err := s.sink.Close(); err != nil {
			j.t.Fatal(err)
		}
	}
}

// verify reads the committed output as an end-to-end test does and
// checks it holds every record exactly once.
func (j *sumJob) verify() error {
	j.t.Helper()
	lines, err := check.ReadCommittedAt(context.Background(), j.env.loc)
	if err != nil {
		j.t.Fatal(err)
	}
	return check.RunningSum(lines, int64(len(j.lines)), 7)
}

// s3Failovers crash a job of two sink subtasks at the points of the two
// phase commit where S3 state differs, then restore it (at parallelism
// restoreP) from the newest completed checkpoint.
var s3Failovers = []struct {
	name string
	// crash runs the job from checkpoint 1 on to the crash, and returns
	// the checkpoint to restore.
	crash    func(t *testing.T, j *sumJob, fs *faultyStore) int64
	restoreP int
}{
	{name: "after pre-commit, before the notification", restoreP: 2, crash: func(t *testing.T, j *sumJob, _ *faultyStore) int64 {
		j.mustEmit(40)
		j.checkpoint(2)
		j.mustEmit(40) // parts of epoch 3 uploaded
		return 2
	}},
	{name: "after the notification, before the commit", restoreP: 2, crash: func(t *testing.T, j *sumJob, fs *faultyStore) int64 {
		j.mustEmit(40)
		j.checkpoint(2)
		j.mustEmit(10)
		fs.failNext("complete", 0)
		if err := j.sinks[0].sink.NotifyCheckpointComplete(2); !errors.Is(err, errInjected) {
			t.Fatalf("commit with a failing complete: %v", err)
		}
		j.sinks[1].complete(t, 2)
		return 2
	}},
	{name: "in the middle of a commit of two epochs", restoreP: 2, crash: func(t *testing.T, j *sumJob, fs *faultyStore) int64 {
		j.mustEmit(40)
		j.checkpoint(2)
		for _, s := range j.sinks {
			if err := s.sink.NotifyCheckpointAborted(2); err != nil {
				t.Fatal(err)
			}
		}
		j.mustEmit(40)
		j.checkpoint(3)
		fs.failNext("complete", 1)
		if err := j.sinks[0].sink.NotifyCheckpointComplete(3); !errors.Is(err, errInjected) {
			t.Fatalf("commit with the second complete failing: %v", err)
		}
		return 3
	}},
	{name: "after the commit", restoreP: 2, crash: func(t *testing.T, j *sumJob, _ *faultyStore) int64 {
		j.mustEmit(40)
		j.checkpoint(2)
		j.complete(2)
		j.mustEmit(40)
		j.checkpoint(3) // never completes
		j.mustEmit(40)
		return 2
	}},
	{name: "in the middle of an upload", restoreP: 2, crash: func(t *testing.T, j *sumJob, fs *faultyStore) int64 {
		j.mustEmit(40)
		j.checkpoint(2)
		fs.failNext("part", 3)
		if err := j.emit(200); !errors.Is(err, errInjected) {
			t.Fatalf("records with a failing part upload: %v", err)
		}
		return 2
	}},
	{name: "after pre-commit, restored at parallelism 1", restoreP: 1, crash: func(t *testing.T, j *sumJob, _ *faultyStore) int64 {
		j.mustEmit(40)
		j.checkpoint(2)
		j.mustEmit(40)
		return 2
	}},
	{name: "after pre-commit, restored at parallelism 3", restoreP: 3, crash: func(t *testing.T, j *sumJob, _ *faultyStore) int64 {
		j.mustEmit(40)
		j.checkpoint(2)
		j.mustEmit(40)
		return 2
	}},
}

var s3Policies = []struct {
	name string
	roll map[string]any
}{
	{"default policy", nil},
	{"rolling without on-checkpoint", map[string]any{"on-checkpoint": false, "max-size": "300B"}},
	{"rolling by size on checkpoints", map[string]any{"max-size": "200B"}},
}

// TestFileSinkS3Failover: records written across several checkpoints
// with a failure at each point of the two-phase commit, restored from
// the newest completed checkpoint and replayed: the committed objects
// hold every record exactly once and no upload is left behind.
func TestFileSinkS3Failover(t *testing.T) {
	srv := blobtest.Fake(t)
	for _, pol := range s3Policies {
		t.Run(pol.name, func(t *testing.T) {
			for _, fo := range s3Failovers {
				t.Run(fo.name, func(t *testing.T) {
					// Parts of 128 bytes: most epochs span parts.
					env := s3Env(t, "gofakes3", srv, 128)
					runS3Failover(t, env, pol.roll, fo.crash, fo.restoreP, nil)
				})
			}
		})
	}
}

func runS3Failover(t *testing.T, env *sinkEnv, roll map[string]any, crash func(*testing.T, *sumJob, *faultyStore) int64, restoreP int, broken func(*faultyStore)) error {
	t.Helper()
	fs := newFaultyStore(env)
	env.mp = fs
	j := newSumJob(t, env, roll, 600, 2)
	j.mustEmit(30)
	j.checkpoint(1)
	j.complete(1)
	k := crash(t, j, fs)
	if broken != nil {
		broken(fs)
	}
	j.restore(k, restoreP)
	if broken == nil {
		// Restoring the same checkpoint again (a failure before any
		// checkpoint completed) changes nothing.
		before := env.committed(t)
		j.restore(k, restoreP)
		if after := env.committed(t); !reflect.DeepEqual(after, before) {
			t.Fatalf("second restore changed the committed objects:\n%v\nwant\n%v", after, before)
		}
	}
	j.mustEmit(50)
	j.checkpoint(10)
	j.complete(10)
	j.finish(11)
	err := j.verify()
	if broken == nil {
		if err != nil {
			t.Fatal(err)
		}
		if left := env.uncommitted(t); len(left) != 0 {
			t.Fatalf("uploads left behind: %q", left)
		}
	}
	return err
}

// The checker catches runs that are not exactly once: a sink bug that
// duplicates or loses records fails it.
func TestFileSinkS3CheckerFailsBrokenRuns(t *testing.T) {
	srv := blobtest.Fake(t)
	// Checkpoint 3 is pre-committed but never completes, and the epoch
	// after it is uploaded in part: names the replay does not reuse.
	crash := s3Failovers[3].crash
	for _, tc := range []struct {
		name   string
		broken func(*faultyStore)
		want   string
	}{
		{"a commit also completes under another name", func(fs *faultyStore) { fs.copyOnComplete = true }, "duplicated"},
		{"the restore commits the uploads it should abort", func(fs *faultyStore) { fs.completeOnAbort = true }, "duplicated"},
		{"a commit aborts instead of completing", func(fs *faultyStore) { fs.dropOnComplete = true }, "lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := s3Env(t, "gofakes3", srv, 128)
			err := runS3Failover(t, env, nil, crash, 2, tc.broken)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checker on a broken run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestFileSinkS3FailoverVersity runs the failovers on a real S3 server
// (versitygw), which enforces the 5 MiB minimum part size and answers a
// complete of a completed upload with NoSuchUpload.
func TestFileSinkS3FailoverVersity(t *testing.T) {
	srv := blobtest.Versity(t)
	for _, pol := range s3Policies[:2] {
		t.Run(pol.name, func(t *testing.T) {
			for _, fo := range s3Failovers {
				t.Run(fo.name, func(t *testing.T) {
					if fo.name == "in the middle of an upload" {
						t.Skip("small records never fill a 5 MiB part: TestFileSinkS3LargeVersity uploads parts")
					}
					runS3Failover(t, s3Env(t, "versitygw", srv, 0), pol.roll, fo.crash, fo.restoreP, nil)
				})
			}
		})
	}
}

// TestFileSinkS3LargeVersity writes part files of several 5 MiB parts on
// a real S3 server, crashing in the middle of an epoch of the default
// policy and in the middle of a rolled-over in-progress file that has
// parts uploaded and a tail in the state.
func TestFileSinkS3LargeVersity(t *testing.T) {
	srv := blobtest.Versity(t)
	pad := strings.Repeat("x", 1014)
	value := func(i int) string { return fmt.Sprintf("%07d%s", i, pad) } // a line of 1 KiB with "k," and "\n"
	const mib = 1024                                                     // lines
	for _, tc := range []struct {
		name string
		roll map[string]any
		// failAfter part uploads succeed after the checkpoint, then one fails
		failAfter int
		// committed after the restore and the checkpoint that follows
		want []string
	}{
		// The epoch after checkpoint 2 fails at its first part.
		{"default policy", nil, 0, []string{"part-0-1", "part-0-3"}},
		// The in-progress file has a part and a 1 MiB tail in checkpoint
		// 1; then its second part is uploaded and the last one, at 12
		// MiB, fails.
		{"rolling without on-checkpoint", map[string]any{"on-checkpoint": false, "max-size": "12MiB"}, 1, []string{"part-0-1-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := s3Env(t, "versitygw", srv, 0)
			fs := newFaultyStore(env)
			env.mp = fs
			cfg := sinkConfig(env.loc, tc.roll)
			c, chk := newClock(), t.TempDir()
			s := env.open(t, cfg, c, 0, 1)
			write := func(s *envSink, from, to int) error {
				for i := from; i < to; i++ {
					if err := s.ctx.Process(t, s.sink, sdk.Record{Key: []byte("k"), Value: []byte(value(i))}, nil); err != nil {
						return err
					}
				}
				return nil
			}
			// 6 MiB: a part uploaded, 1 MiB buffered.
			if err := write(s, 0, 6*mib); err != nil {
				t.Fatal(err)
			}
			prev := []*weirv1.SubtaskState{s.ctx.Checkpoint(t, s.sink, chk, 1)}
			if tc.roll == nil {
				s.complete(t, 1)
				prev = []*weirv1.SubtaskState{s.ctx.Checkpoint(t, s.sink, chk, 2)}
			}
			fs.failNext("part", tc.failAfter)
			if err := write(s, 6*mib, 13*mib); !errors.Is(err, errInjected) {
				t.Fatalf("writes with a failing part upload: %v", err)
			}
			restoreID := int64(1)
			if tc.roll == nil {
				restoreID = 2
			}
			s = env.restore(t, cfg, c, 0, 1, 1, restoreID, prev)
			if err := write(s, 6*mib, 13*mib); err != nil {
				t.Fatal(err)
			}
			s.ctx.Checkpoint(t, s.sink, chk, 3)
			s.complete(t, 3)
			var names []string
			for name := range env.committed(t) {
				names = append(names, name)
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.want) {
				t.Fatalf("committed %q, want %q", names, tc.want)
			}
			if err := s.sink.EndInput(nil); err != nil {
				t.Fatal(err)
			}
			s.ctx.Checkpoint(t, s.sink, chk, 4)
			s.complete(t, 4)
			lines, err := check.ReadCommittedAt(context.Background(), env.loc)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]string, 13*mib)
			for i := range want {
				want[i] = "k," + value(i)
			}
			slices.Sort(lines)
			if !slices.Equal(lines, want) {
				t.Fatalf("%d committed lines, want each of %d records once", len(lines), len(want))
			}
			if left := env.uncommitted(t); len(left) != 0 {
				t.Fatalf("uploads left behind: %q", left)
			}
		})
	}
}

func TestFileSinkS3Config(t *testing.T) {
	srv := blobtest.Fake(t)
	env := s3Env(t, "gofakes3", srv, 0)
	open := func(path string) error {
		return (&FileSink{}).Open(sdktest.NewContext("sink", sdk.Config{"path": path}, 0, 1))
	}
	if err := open(env.loc); err != nil {
		t.Fatalf("open %s: %v", env.loc, err)
	}
	if err := open("s3://no-such-bucket/out"); err == nil || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Fatalf("open a missing bucket: %v, want an error naming it", err)
	}
	if err := open("s3:///out"); err == nil || !strings.Contains(err.Error(), "no bucket") {
		t.Fatalf("open without a bucket: %v", err)
	}
	if err := open("gs://bucket/out"); err == nil || !strings.Contains(err.Error(), `unsupported scheme "gs"`) {
		t.Fatalf("open gs://: %v", err)
	}
	S3Config = func() (blob.S3Config, bool) { return blob.S3Config{}, false }
	if err := open(env.loc); err == nil || !strings.Contains(err.Error(), "S3 is not configured") {
		t.Fatalf("open without S3 configured: %v", err)
	}
	// max-size must fit in an object of 10000 parts.
	err := (&FileSink{mp: env.client}).Open(sdktest.NewContext("sink", sdk.Config{"path": env.loc, "roll": map[string]any{"max-size": "50GiB"}}, 0, 1))
	if err == nil || !strings.Contains(err.Error(), "roll.max-size") {
		t.Fatalf("open with a max-size beyond 10000 parts: %v", err)
	}
}

// The default S3Config reads the daemons' WEIR_S3_* variables, then the
// AWS ones.
func TestFileSinkS3ConfigFromEnv(t *testing.T) {
	for _, k := range []string{"WEIR_S3_ENDPOINT", "WEIR_S3_REGION", "WEIR_S3_PATH_STYLE", "WEIR_S3_ACCESS_KEY_ID", "WEIR_S3_SECRET_ACCESS_KEY",
		"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		t.Setenv(k, "")
	}
	old := blob.Default.S3
	blob.Default.S3 = nil
	t.Cleanup(func() { blob.Default.S3 = old })
	if _, ok := s3ConfigFromEnv(); ok {
		t.Fatal("S3 configured without any setting")
	}
	t.Setenv("WEIR_S3_ENDPOINT", "http://127.0.0.1:9000")
	t.Setenv("WEIR_S3_PATH_STYLE", "path")
	t.Setenv("AWS_ENDPOINT_URL", "http://ignored:1")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "aws-key")
	t.Setenv("WEIR_S3_SECRET_ACCESS_KEY", "weir-secret")
	cfg, ok := s3ConfigFromEnv()
	want := blob.S3Config{Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1", PathStyle: "path", AccessKey: "aws-key", SecretKey: "weir-secret"}
	if !ok || cfg != want {
		t.Fatalf("config %+v (ok %v), want %+v", cfg, ok, want)
	}
}

// State written before rolling policies, "<subtask>:<checkpoint>,…",
// restores: its pending files are committed.
func TestFileSinkRestoresOldState(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{".part-0-1.pending", ".part-0-2.pending", ".part-0-inprogress-0-abcd0123-2"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("k,"+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := sdktest.NewContext("sink", sdk.Config{"path": dir}, 0, 1)
	ctx.Heap.ListState("pending", false).Update([][]byte{[]byte("0:1,2")})
	if err := (&FileSink{}).Open(ctx); err != nil {
		t.Fatal(err)
	}
	visible, hidden := listDir(t, dir)
	want := map[string][]string{"part-0-1": {"k,.part-0-1.pending"}, "part-0-2": {"k,.part-0-2.pending"}}
	if !reflect.DeepEqual(visible, want) || len(hidden) != 0 {
		t.Fatalf("committed %v hidden %q, want %v and nothing hidden", visible, hidden, want)
	}
}

// In S3 the default policy names an epoch's object after its checkpoint
// when the upload starts at the snapshot; an epoch of more than a part
// starts its upload earlier, named after the checkpoint following the
// previous one: its checkpoint unless checkpoints were skipped.
func TestFileSinkS3EpochNames(t *testing.T) {
	env := s3Env(t, "gofakes3", blobtest.Fake(t), 8)
	s := env.open(t, sinkConfig(env.loc, nil), newClock(), 0, 1)
	chk := t.TempDir()
	step := func(id int64, values ...string) {
		t.Helper()
		s.write(t, values...)
		s.ctx.Checkpoint(t, s.sink, chk, id)
	}
	step(3, "a")           // 4 bytes: uploaded at the snapshot of 3
	step(6, "b", "c", "d") // 12 bytes: the upload starts after checkpoint 3
	step(7, "e", "f")      // a part: the upload starts in epoch 7
	s.complete(t, 7)
	want := map[string][]string{"part-0-3": {"k,a"}, "part-0-4": {"k,b", "k,c", "k,d"}, "part-0-7": {"k,e", "k,f"}}
	if got := env.committed(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("committed %v, want %v", got, want)
	}
}
