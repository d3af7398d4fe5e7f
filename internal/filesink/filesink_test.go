package filesink

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/sdktest"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// sinkSubtask is one subtask of a file-sink with its test context.
type sinkSubtask struct {
	ctx  *sdktest.Context
	sink *FileSink
}

func openSink(t *testing.T, ctx *sdktest.Context) *sinkSubtask {
	t.Helper()
	s := &FileSink{}
	if err := s.Open(ctx); err != nil {
		t.Fatalf("open file-sink subtask %d: %v", ctx.SubtaskIndex(), err)
	}
	return &sinkSubtask{ctx: ctx, sink: s}
}

func newSink(t *testing.T, dir string, subtask, parallelism int) *sinkSubtask {
	t.Helper()
	return openSink(t, sdktest.NewContext("sink", sdk.Config{"path": dir}, subtask, parallelism))
}

// restoreSinks opens every subtask of a new attempt from the states of
// checkpoint id, as a failover of the whole vertex does.
func restoreSinks(t *testing.T, dir string, parallelism, attempt int, id int64, prev []*weirv1.SubtaskState) []*sinkSubtask {
	t.Helper()
	out := make([]*sinkSubtask, parallelism)
	for i := range out {
		out[i] = openSink(t, sdktest.Restore(t, "sink", sdk.Config{"path": dir}, i, parallelism, attempt, id, prev))
	}
	return out
}

func (s *sinkSubtask) write(t *testing.T, values ...string) {
	t.Helper()
	for _, v := range values {
		if err := s.ctx.Process(t, s.sink, sdk.Record{Key: []byte("k"), Value: []byte(v)}, nil); err != nil {
			t.Fatalf("subtask %d: write %q: %v", s.ctx.SubtaskIndex(), v, err)
		}
	}
}

func (s *sinkSubtask) complete(t *testing.T, id int64) {
	t.Helper()
	if err := s.sink.NotifyCheckpointComplete(id); err != nil {
		t.Fatalf("subtask %d: complete %d: %v", s.ctx.SubtaskIndex(), id, err)
	}
}

var runToken = regexp.MustCompile(`-[0-9a-f]{8}-`)

// listDir returns the committed (visible) files of dir with their lines,
// and the names of the hidden files.
func listDir(t *testing.T, dir string) (visible map[string][]string, hidden []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	visible = map[string][]string{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			// In-progress names carry a random run token; the expectations
			// leave it out.
			hidden = append(hidden, runToken.ReplaceAllString(e.Name(), "-"))
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		visible[e.Name()] = lines(b)
	}
	return visible, hidden
}

func lines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// dirContents is every file of dir, hidden or not, with its content.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// committedValues is the multiset of values in the committed files of dir.
func committedValues(t *testing.T, dir string) []string {
	t.Helper()
	visible, _ := listDir(t, dir)
	var out []string
	for _, ls := range visible {
		for _, l := range ls {
			_, v, _ := strings.Cut(l, ",")
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// TestFileSinkTwoPhaseCommit drives one subtask through scripted steps:
//
//	write v…           records with key k and the given values
//	snapshot N         SnapshotState(N) (pre-commit)
//	complete N         NotifyCheckpointComplete(N)
//	abort N            NotifyCheckpointAborted(N)
//	close              Close()
//	visible f=v;v …    the committed files, exactly, with their values
//	hidden name …      the hidden files, exactly
func TestFileSinkTwoPhaseCommit(t *testing.T) {
	tests := []struct {
		name    string
		subtask int
		steps   []string
	}{
		{
			name: "records become visible only on completion",
			steps: []string{
				"write a b",
				"visible", "hidden .part-0-inprogress-0-0",
				"snapshot 1",
				"visible", "hidden .part-0-1.pending",
				"write c",
				"visible", "hidden .part-0-1.pending .part-0-inprogress-0-1",
				"complete 1",
				"visible part-0-1=a;b", "hidden .part-0-inprogress-0-1",
				"snapshot 2",
				"visible part-0-1=a;b", "hidden .part-0-2.pending",
				"complete 2",
				"visible part-0-1=a;b part-0-2=c", "hidden",
				"close",
				"visible part-0-1=a;b part-0-2=c", "hidden",
			},
		},
		{
			name: "aborted epoch is committed by the next completed checkpoint",
			steps: []string{
				"write a", "snapshot 1", "abort 1",
				"visible", "hidden .part-0-1.pending",
				"write b", "snapshot 2",
				"visible", "hidden .part-0-1.pending .part-0-2.pending",
				"complete 2",
				"visible part-0-1=a part-0-2=b", "hidden",
			},
		},
		{
			name: "several aborts in a row, one without records",
			steps: []string{
				"write a", "snapshot 1", "abort 1",
				"snapshot 2", "abort 2",
				"write b", "snapshot 3", "abort 3",
				"write c", "snapshot 4", "complete 4",
				"visible part-0-1=a part-0-3=b part-0-4=c", "hidden",
			},
		},
		{
			name: "aborted checkpoint whose completion of an older one arrives late",
			steps: []string{
				"write a", "snapshot 1",
				"write b", "snapshot 2", "abort 2",
				"complete 1",
				"visible part-0-1=a", "hidden .part-0-2.pending",
				"snapshot 3", "complete 3",
				"visible part-0-1=a part-0-2=b", "hidden",
			},
		},
		{
			name: "epoch without records makes no file",
			steps: []string{
				"snapshot 1", "complete 1",
				"visible", "hidden",
				"write a", "snapshot 2", "snapshot 3", "complete 3",
				"visible part-0-2=a", "hidden",
				"snapshot 4", "complete 4", "close",
				"visible part-0-2=a", "hidden",
			},
		},
		{
			name: "completing an older checkpoint leaves newer pre-committed epochs hidden",
			steps: []string{
				"write a", "snapshot 1",
				"write b", "snapshot 2",
				"write c",
				"complete 1",
				"visible part-0-1=a", "hidden .part-0-2.pending .part-0-inprogress-0-2",
				"complete 2",
				"visible part-0-1=a part-0-2=b", "hidden .part-0-inprogress-0-2",
				"snapshot 3", "complete 3", "close",
				"visible part-0-1=a part-0-2=b part-0-3=c", "hidden",
			},
		},
		{
			name: "duplicate and stale notifications are harmless",
			steps: []string{
				"write a", "snapshot 1", "complete 1", "complete 1", "abort 1",
				"write b", "snapshot 2", "abort 1", "complete 1",
				"visible part-0-1=a", "hidden .part-0-2.pending",
				"complete 2", "complete 2",
				"visible part-0-1=a part-0-2=b", "hidden",
			},
		},
		{
			name:    "file names carry the subtask index",
			subtask: 3,
			steps: []string{
				"write x", "visible", "hidden .part-3-inprogress-0-0",
				"snapshot 7", "visible", "hidden .part-3-7.pending",
				"complete 7", "visible part-3-7=x", "hidden",
			},
		},
		{
			name: "line format is key,value",
			steps: []string{
				"write 1,2 , x",
				"snapshot 1", "complete 1",
				"visible part-0-1=1,2;,;x", "hidden",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newSink(t, dir, tc.subtask, tc.subtask+1)
			for i, step := range tc.steps {
				op, arg, _ := strings.Cut(step, " ")
				fields := strings.Fields(arg)
				id, _ := strconv.ParseInt(arg, 10, 64)
				var err error
				switch op {
				case "write":
					s.write(t, fields...)
				case "snapshot":
					err = s.sink.SnapshotState(id)
				case "complete":
					err = s.sink.NotifyCheckpointComplete(id)
				case "abort":
					err = s.sink.NotifyCheckpointAborted(id)
				case "close":
					err = s.sink.Close()
				case "visible":
					want := map[string][]string{}
					for _, f := range fields {
						name, vals, _ := strings.Cut(f, "=")
						for _, v := range strings.Split(vals, ";") {
							want[name] = append(want[name], "k,"+v)
						}
					}
					if got, _ := listDir(t, dir); !reflect.DeepEqual(got, want) {
						t.Fatalf("step %d %q: committed files %v, want %v", i, step, got, want)
					}
				case "hidden":
					if _, got := listDir(t, dir); !slices.Equal(got, fields) {
						t.Fatalf("step %d %q: hidden files %q, want %q", i, step, got, fields)
					}
				default:
					t.Fatalf("bad step %q", step)
				}
				if err != nil {
					t.Fatalf("step %d %q: %v", i, step, err)
				}
			}
		})
	}
}

func TestFileSinkConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  sdk.Config
		want string // substring of the error
	}{
		{"missing path", sdk.Config{}, "path is required"},
		{"empty path", sdk.Config{"path": ""}, "path is required"},
		{"nil path", sdk.Config{"path": nil}, "path is required"},
		{"path not a string", sdk.Config{"path": 42.0}, `config "path"`},
		{"path is a file", sdk.Config{"path": file}, "file-sink"},
		{"unknown line", sdk.Config{"path": file, "line": "key"}, `config "line": unknown line "key"`},
		{"line not a string", sdk.Config{"path": file, "line": 1.0}, `config "line"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := (&FileSink{}).Open(sdktest.NewContext("sink", tc.cfg, 0, 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// The directory is created when missing.
	dir := filepath.Join(t.TempDir(), "a", "b")
	newSink(t, dir, 0, 1)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("output directory not created: %v", err)
	}
}

// TestFileSinkValueLines: with line: value a line is the record's value
// alone, as a SQL sink writes its rows; key-value is the default.
func TestFileSinkValueLines(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"", []string{"k,a,1", `k,{"b":2}`}},
		{"key-value", []string{"k,a,1", `k,{"b":2}`}},
		{"value", []string{"a,1", `{"b":2}`}},
	} {
		dir := t.TempDir()
		cfg := sdk.Config{"path": dir}
		if tc.line != "" {
			cfg["line"] = tc.line
		}
		s := openSink(t, sdktest.NewContext("sink", cfg, 0, 1))
		s.write(t, "a,1", `{"b":2}`)
		if err := s.sink.SnapshotState(1); err != nil {
			t.Fatal(err)
		}
		s.complete(t, 1)
		if got, _ := listDir(t, dir); !reflect.DeepEqual(got, map[string][]string{"part-0-1": tc.want}) {
			t.Errorf("line %q: committed %v, want part-0-1 = %q", tc.line, got, tc.want)
		}
	}
}

func TestFileSinkCorruptPendingState(t *testing.T) {
	for _, item := range []string{"x", "", "0:1,x", "zz:1", "0:-"} {
		t.Run(strconv.Quote(item), func(t *testing.T) {
			ctx := sdktest.NewContext("sink", sdk.Config{"path": t.TempDir()}, 0, 1)
			ctx.Heap.ListState("pending", false).Update([][]byte{[]byte(item)})
			err := (&FileSink{}).Open(ctx)
			if err == nil || !strings.Contains(err.Error(), "corrupt pending state") {
				t.Fatalf("Open: %v, want a corrupt pending state error", err)
			}
		})
	}
}

// TestFileSinkFailover crashes a running sink after checkpoint k completed
// and restores a new attempt from k's state: what k pre-committed is
// committed exactly once, whatever came after k is discarded, and replaying
// the records after k (as the restored sources do) leaves every record
// committed exactly once.
func TestFileSinkFailover(t *testing.T) {
	tests := []struct {
		name string
		// notified: the sink saw NotifyCheckpointComplete(k) before the
		// crash (the rename happened); otherwise the JobManager completed k
		// but the sink crashed before the notification arrived.
		notified bool
		// closeOnCrash: Close is called on the crashed instance.
		closeOnCrash bool
		// abortBefore: checkpoint k-1 was aborted, so k's state holds two
		// pre-committed epochs.
		abortBefore bool
		// idle lists subtasks that get no records in k's epoch.
		idle        []int
		parallelism int
	}{
		{name: "notified, dropped", notified: true, parallelism: 2},
		{name: "notified, closed", notified: true, closeOnCrash: true, parallelism: 2},
		{name: "not notified, dropped", parallelism: 2},
		{name: "not notified, closed", closeOnCrash: true, parallelism: 2},
		{name: "not notified, aborted epoch before k", abortBefore: true, parallelism: 2},
		{name: "notified, aborted epoch before k", notified: true, abortBefore: true, parallelism: 2},
		{name: "not notified, subtask 0 idle in k", idle: []int{0}, parallelism: 2},
		{name: "not notified, subtask 1 idle in k", idle: []int{1}, parallelism: 2},
		{name: "not notified, subtask 1 idle, aborted epoch before k", idle: []int{1}, abortBefore: true, parallelism: 3},
		{name: "notified, all idle in k", idle: []int{0, 1, 2}, notified: true, parallelism: 3},
		{name: "single subtask", parallelism: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, chk := t.TempDir(), t.TempDir()
			p := tc.parallelism
			sinks := make([]*sinkSubtask, p)
			for i := range sinks {
				sinks[i] = newSink(t, dir, i, p)
			}
			// every value written; the ones after k are replayed after the
			// restore, like a restored source does.
			var all, afterK []string
			val := func(i int, what string) string { return fmt.Sprintf("s%d-%s", i, what) }
			writeAll := func(what string, skip []int, replay bool) {
				for i, s := range sinks {
					if slices.Contains(skip, i) {
						continue
					}
					v := val(i, what)
					s.write(t, v)
					all = append(all, v)
					if replay {
						afterK = append(afterK, v)
					}
				}
			}

			writeAll("e1", nil, false)
			for _, s := range sinks {
				s.ctx.Checkpoint(t, s.sink, chk, 1)
				s.complete(t, 1)
			}
			k := int64(2)
			if tc.abortBefore {
				writeAll("e2", nil, false)
				for _, s := range sinks {
					s.ctx.Checkpoint(t, s.sink, chk, 2)
					if err := s.sink.NotifyCheckpointAborted(2); err != nil {
						t.Fatal(err)
					}
				}
				k = 3
			}
			writeAll("ek", tc.idle, false)
			var prev []*weirv1.SubtaskState
			for _, s := range sinks {
				prev = append(prev, s.ctx.Checkpoint(t, s.sink, chk, k))
			}
			if tc.notified {
				for _, s := range sinks {
					s.complete(t, k)
				}
			}
			// Epoch k+1 is pre-committed but k+1 never completes; the next
			// epoch is still in progress when the process dies.
			writeAll("ek1", nil, true)
			for _, s := range sinks {
				s.ctx.Checkpoint(t, s.sink, chk, k+1)
			}
			writeAll("ek2", nil, true)
			if tc.closeOnCrash {
				for _, s := range sinks {
					if err := s.sink.Close(); err != nil {
						t.Fatal(err)
					}
				}
			}

			// What must be committed after the restore: every epoch <= k.
			want := map[string][]string{}
			for i := range p {
				want[FinalName(i, 1)] = []string{"k," + val(i, "e1")}
				if tc.abortBefore {
					want[FinalName(i, 2)] = []string{"k," + val(i, "e2")}
				}
				if !slices.Contains(tc.idle, i) {
					want[FinalName(i, k)] = []string{"k," + val(i, "ek")}
				}
			}

			sinks = restoreSinks(t, dir, p, 1, k, prev)
			visible, hidden := listDir(t, dir)
			if !reflect.DeepEqual(visible, want) {
				t.Fatalf("after restore: committed %v, want %v", visible, want)
			}
			if len(hidden) != 0 {
				t.Fatalf("after restore: hidden files left: %q", hidden)
			}

			// Restoring the same state again (another failure before any
			// checkpoint completed) changes nothing.
			before := dirContents(t, dir)
			sinks = restoreSinks(t, dir, p, 2, k, prev)
			if after := dirContents(t, dir); !reflect.DeepEqual(after, before) {
				t.Fatalf("second restore changed the directory:\n%v\nwant\n%v", after, before)
			}

			// The sources replay everything after k; the next checkpoint
			// (IDs are never reused) commits it.
			for i, s := range sinks {
				for _, v := range afterK {
					if strings.HasPrefix(v, fmt.Sprintf("s%d-", i)) {
						s.write(t, v)
					}
				}
			}
			for _, s := range sinks {
				s.ctx.Checkpoint(t, s.sink, chk, k+2)
				s.complete(t, k+2)
				if err := s.sink.Close(); err != nil {
					t.Fatal(err)
				}
			}
			slices.Sort(all)
			if got := committedValues(t, dir); !slices.Equal(got, all) {
				t.Fatalf("committed values %q, want each of %q exactly once", got, all)
			}
			if _, hidden := listDir(t, dir); len(hidden) != 0 {
				t.Fatalf("hidden files left after a clean finish: %q", hidden)
			}
		})
	}
}

// A restore deletes only this subtask's hidden files: other subtasks'
// in-progress and pending files, their committed files and unrelated files
// stay.
func TestFileSinkRestoreLeavesOtherSubtasksAlone(t *testing.T) {
	dir, chk := t.TempDir(), t.TempDir()
	const p = 2
	s0, s1 := newSink(t, dir, 0, p), newSink(t, dir, 1, p)
	s0.write(t, "a0")
	s1.write(t, "a1")
	prev := []*weirv1.SubtaskState{s0.ctx.Checkpoint(t, s0.sink, chk, 1), s1.ctx.Checkpoint(t, s1.sink, chk, 1)}
	s0.write(t, "b0")
	s1.write(t, "b1")
	s0.ctx.Checkpoint(t, s0.sink, chk, 2)
	s1.ctx.Checkpoint(t, s1.sink, chk, 2)
	s0.write(t, "c0")
	s1.write(t, "c1")
	for _, name := range []string{".part-10-3.pending", ".part-11-inprogress-0-0", ".part-1x", ".other", "README"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Subtask 1 alone is restored from checkpoint 1 (subtask 0 still runs).
	openSink(t, sdktest.Restore(t, "sink", sdk.Config{"path": dir}, 1, p, 1, 1, prev))
	visible, hidden := listDir(t, dir)
	wantVisible := map[string][]string{"part-1-1": {"k,a1"}, "README": {"README"}}
	if !reflect.DeepEqual(visible, wantVisible) {
		t.Fatalf("committed %v, want %v", visible, wantVisible)
	}
	wantHidden := []string{".other", ".part-0-1.pending", ".part-0-2.pending", ".part-0-inprogress-0-2", ".part-10-3.pending", ".part-11-inprogress-0-0", ".part-1x"}
	if !slices.Equal(hidden, wantHidden) {
		t.Fatalf("hidden files %q, want %q", hidden, wantHidden)
	}
	// Subtask 0 carries on undisturbed.
	s0.complete(t, 2)
	s0.ctx.Checkpoint(t, s0.sink, chk, 3)
	s0.complete(t, 3)
	visible, _ = listDir(t, dir)
	for name, want := range map[string][]string{"part-0-1": {"k,a0"}, "part-0-2": {"k,b0"}, "part-0-3": {"k,c0"}} {
		if !slices.Equal(visible[name], want) {
			t.Fatalf("%s = %q, want %q", name, visible[name], want)
		}
	}
}

// Restoring at a different parallelism commits what every old subtask
// pre-committed and cleans up the hidden files of old subtasks that no
// longer exist.
func TestFileSinkRestoreRescaled(t *testing.T) {
	for _, tc := range []struct{ from, to int }{{2, 1}, {3, 2}, {1, 2}, {2, 4}} {
		t.Run(fmt.Sprintf("%d to %d", tc.from, tc.to), func(t *testing.T) {
			dir, chk := t.TempDir(), t.TempDir()
			var prev []*weirv1.SubtaskState
			want := map[string][]string{}
			for i := range tc.from {
				s := newSink(t, dir, i, tc.from)
				v := fmt.Sprintf("v%d", i)
				s.write(t, v)
				prev = append(prev, s.ctx.Checkpoint(t, s.sink, chk, 1))
				want[FinalName(i, 1)] = []string{"k," + v}
				s.write(t, "lost")
				s.ctx.Checkpoint(t, s.sink, chk, 2)
				s.write(t, "lost")
			}
			restoreSinks(t, dir, tc.to, 1, 1, prev)
			visible, hidden := listDir(t, dir)
			if !reflect.DeepEqual(visible, want) {
				t.Fatalf("committed %v, want %v", visible, want)
			}
			if len(hidden) != 0 {
				t.Fatalf("hidden files left: %q", hidden)
			}
		})
	}
}

// dirSyncs stands in for the directory fsync: it records what the directory
// held at each sync, so a test sees which renames a sync covered, and fails
// with err when set.
type dirSyncs struct {
	t     *testing.T
	calls [][]string // the names in the directory at each sync
	err   error
}

func (r *dirSyncs) sync(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		r.t.Errorf("sync %s: %v", dir, err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, runToken.ReplaceAllString(e.Name(), "-"))
	}
	r.calls = append(r.calls, names)
	return r.err
}

// logCtx is a sdktest.Context whose logger writes into buf.
type logCtx struct {
	*sdktest.Context
	buf *strings.Builder
}

func (c logCtx) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(c.buf, nil)) }

// openSinkWith opens a sink whose directory syncs go to syncs and whose
// logs go to logs.
func openSinkWith(t *testing.T, ctx *sdktest.Context, syncs *dirSyncs, logs *strings.Builder) (*sinkSubtask, error) {
	t.Helper()
	s := &FileSink{syncDir: syncs.sync}
	if err := s.Open(logCtx{ctx, logs}); err != nil {
		return nil, err
	}
	return &sinkSubtask{ctx: ctx, sink: s}, nil
}

// Each rename is followed by a sync of the directory, so the pre-committed
// and the committed name survive a power loss; a failed sync fails the
// pre-commit or the commit like a failed rename would.
func TestFileSinkSyncsDirectoryAfterRename(t *testing.T) {
	dir := t.TempDir()
	syncs := &dirSyncs{t: t}
	s, err := openSinkWith(t, sdktest.NewContext("sink", sdk.Config{"path": dir}, 0, 1), syncs, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	s.write(t, "a")
	chk := t.TempDir()
	prev := []*weirv1.SubtaskState{s.ctx.Checkpoint(t, s.sink, chk, 1)}
	if want := [][]string{{".part-0-1.pending"}}; !reflect.DeepEqual(syncs.calls, want) {
		t.Fatalf("after the pre-commit: syncs saw %q, want %q", syncs.calls, want)
	}
	s.complete(t, 1)
	if want := [][]string{{".part-0-1.pending"}, {"part-0-1"}}; !reflect.DeepEqual(syncs.calls, want) {
		t.Fatalf("after the commit: syncs saw %q, want %q", syncs.calls, want)
	}

	diskGone := errors.New("disk gone")
	syncs.err = diskGone
	s.write(t, "b")
	err = s.sink.SnapshotState(2)
	if !errors.Is(err, diskGone) || !strings.Contains(err.Error(), "pre-commit checkpoint 2") {
		t.Fatalf("pre-commit with a failing directory sync: %v, want the sync error with context", err)
	}
	// Epoch 2's file is given up, so "b" is in no file: the sink refuses
	// to go on (the subtask fails and restores, and the source replays
	// "b") instead of committing later epochs without it.
	syncs.err = nil
	for what, err := range map[string]error{
		"a record":                  s.ctx.Process(t, s.sink, sdk.Record{Key: []byte("k"), Value: []byte("c")}, nil),
		"the next snapshot":         s.sink.SnapshotState(3),
		"the abort of checkpoint 2": s.sink.NotifyCheckpointAborted(2),
	} {
		if err == nil || !strings.Contains(err.Error(), "restarts from the last completed checkpoint") {
			t.Errorf("%s after a lost epoch: %v, want the lost epoch's error", what, err)
		}
	}

	// The restored attempt (from checkpoint 1's state) writes "b" and "c"
	// again; a commit whose directory sync fails fails, and committing
	// again syncs again.
	r, err := openSinkWith(t, sdktest.Restore(t, "sink", sdk.Config{"path": dir}, 0, 1, 1, 1, prev), syncs, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	r.write(t, "b", "c")
	if err := r.sink.SnapshotState(3); err != nil {
		t.Fatal(err)
	}
	syncs.err = diskGone
	err = r.sink.NotifyCheckpointComplete(3)
	if !errors.Is(err, diskGone) || !strings.Contains(err.Error(), "commit checkpoint 3") {
		t.Fatalf("commit with a failing directory sync: %v, want the sync error with context", err)
	}
	// The rename happened but may not be durable: committing again syncs
	// the directory again.
	syncs.err, syncs.calls = nil, nil
	r.complete(t, 3)
	if want := [][]string{{"part-0-1", "part-0-3"}}; !reflect.DeepEqual(syncs.calls, want) {
		t.Fatalf("re-commit after a failed sync: syncs saw %q, want %q", syncs.calls, want)
	}
	lines, err := check.ReadCommitted(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(lines, " "); got != "k,a k,b k,c" {
		t.Fatalf("committed %q, want a, b and c once", got)
	}
}

// The pre-commit's fsyncs run in the function SnapshotStateAsync returns,
// which the subtask runs off its goroutine: records go on into the next
// file meanwhile. Each such part waits for the one before, so a failure
// fails every later checkpoint, whichever part runs first.
func TestFileSinkSyncsAsynchronously(t *testing.T) {
	dir := t.TempDir()
	syncs := &dirSyncs{t: t}
	s, err := openSinkWith(t, sdktest.NewContext("sink", sdk.Config{"path": dir}, 0, 1), syncs, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	s.write(t, "a")
	finish1, err := s.sink.SnapshotStateAsync(1)
	if err != nil || finish1 == nil {
		t.Fatalf("SnapshotStateAsync(1) = %v, %v; want a function to finish with", finish1 != nil, err)
	}
	if len(syncs.calls) != 0 {
		t.Fatalf("the synchronous part synced the directory: %q", syncs.calls)
	}
	s.write(t, "b") // while checkpoint 1's files sync
	if err := finish1(); err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{".part-0-1.pending", ".part-0-inprogress-0-1"}}; !reflect.DeepEqual(syncs.calls, want) {
		t.Fatalf("after the asynchronous part: syncs saw %q, want %q", syncs.calls, want)
	}
	s.complete(t, 1)

	// Checkpoint 2's part fails; checkpoint 3's, started first, waits for
	// it and fails too, and nothing of either is committed.
	finish2, err := s.sink.SnapshotStateAsync(2)
	if err != nil {
		t.Fatal(err)
	}
	s.write(t, "c")
	finish3, err := s.sink.SnapshotStateAsync(3)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- finish3() }()
	diskGone := errors.New("disk gone")
	syncs.err = diskGone
	if err := finish2(); !errors.Is(err, diskGone) || !strings.Contains(err.Error(), "pre-commit checkpoint 2") {
		t.Fatalf("checkpoint 2's asynchronous part: %v, want the sync error with context", err)
	}
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "restarts from the last completed checkpoint") {
		t.Fatalf("checkpoint 3's asynchronous part after checkpoint 2's failed: %v, want checkpoint 2's failure", err)
	}
	for what, err := range map[string]error{
		"the abort of checkpoint 2": s.sink.NotifyCheckpointAborted(2),
		"the completion of 3":       s.sink.NotifyCheckpointComplete(3),
	} {
		if err == nil || !strings.Contains(err.Error(), "restarts from the last completed checkpoint") {
			t.Errorf("%s after a failed pre-commit: %v, want its error", what, err)
		}
	}
	lines, err := check.ReadCommitted(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(lines, " "); got != "k,a" {
		t.Fatalf("committed %q, want only checkpoint 1's a", got)
	}
}

// A restore re-commits what its checkpoint pre-committed; when the previous
// attempt had committed it already, that is logged and the directory is
// synced again (the previous attempt may have died before its sync).
func TestFileSinkRecommitAfterRestore(t *testing.T) {
	dir, chk := t.TempDir(), t.TempDir()
	s := newSink(t, dir, 0, 1)
	s.write(t, "a")
	prev := []*weirv1.SubtaskState{s.ctx.Checkpoint(t, s.sink, chk, 1)}
	s.complete(t, 1)

	syncs, logs := &dirSyncs{t: t}, &strings.Builder{}
	if _, err := openSinkWith(t, sdktest.Restore(t, "sink", sdk.Config{"path": dir}, 0, 1, 1, 1, prev), syncs, logs); err != nil {
		t.Fatalf("restore after the commit: %v", err)
	}
	if visible, hidden := listDir(t, dir); !reflect.DeepEqual(visible, map[string][]string{"part-0-1": {"k,a"}}) || len(hidden) != 0 {
		t.Fatalf("after the restore: committed %v, hidden %q", visible, hidden)
	}
	if !strings.Contains(logs.String(), "already committed") || !strings.Contains(logs.String(), "checkpoint_id=1") {
		t.Fatalf("the re-commit was not logged; log:\n%s", logs)
	}
	if len(syncs.calls) != 1 {
		t.Fatalf("re-commit synced the directory %d times, want once", len(syncs.calls))
	}
}

// An epoch whose pending file and committed file are both gone cannot be
// committed: its records would be lost, and that must fail loudly, on a
// notification and on a restore.
func TestFileSinkCommitLostEpoch(t *testing.T) {
	dir, chk := t.TempDir(), t.TempDir()
	s := newSink(t, dir, 0, 1)
	s.write(t, "a")
	prev := []*weirv1.SubtaskState{s.ctx.Checkpoint(t, s.sink, chk, 1)}
	if err := os.Remove(filepath.Join(dir, ".part-0-1.pending")); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !errors.Is(err, fs.ErrNotExist) ||
			!strings.Contains(err.Error(), "commit checkpoint 1") ||
			!strings.Contains(err.Error(), ".part-0-1.pending") || !strings.Contains(err.Error(), "part-0-1 ") ||
			!strings.Contains(err.Error(), "records are lost") {
			t.Fatalf("%s: %v, want an error naming both missing files and saying records are lost", what, err)
		}
	}
	check("commit", s.sink.NotifyCheckpointComplete(1))
	_, err := openSinkWith(t, sdktest.Restore(t, "sink", sdk.Config{"path": dir}, 0, 1, 1, 1, prev), &dirSyncs{t: t}, &strings.Builder{})
	check("restore", err)
}
