package filesink

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/blob/blobtest"
	"github.com/weirproject/weir/internal/sdktest"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

func TestFileSinkRollConfig(t *testing.T) {
	dir := t.TempDir()
	good := []struct {
		roll any
		want rollPolicy
	}{
		{nil, rollPolicy{onCheckpoint: true}},
		{map[string]any{}, rollPolicy{onCheckpoint: true}},
		{map[string]any{"on-checkpoint": true}, rollPolicy{onCheckpoint: true}},
		{map[string]any{"max-size": "64MiB"}, rollPolicy{maxSize: 64 << 20, onCheckpoint: true}},
		{map[string]any{"max-size": "1GiB", "max-age": "90s"}, rollPolicy{maxSize: 1 << 30, maxAge: 90 * time.Second, onCheckpoint: true}},
		{map[string]any{"max-size": 1000.0}, rollPolicy{maxSize: 1000, onCheckpoint: true}},
		{map[string]any{"max-size": 1000}, rollPolicy{maxSize: 1000, onCheckpoint: true}},
		{map[string]any{"max-size": "1.5 kib"}, rollPolicy{maxSize: 1536, onCheckpoint: true}},
		{map[string]any{"max-size": "2MB"}, rollPolicy{maxSize: 2e6, onCheckpoint: true}},
		{map[string]any{"max-size": "512"}, rollPolicy{maxSize: 512, onCheckpoint: true}},
		{map[string]any{"on-checkpoint": false}, rollPolicy{maxSize: 128 << 20, maxAge: time.Minute}},
		{map[string]any{"on-checkpoint": "false", "max-age": "5m"}, rollPolicy{maxSize: 128 << 20, maxAge: 5 * time.Minute}},
		{map[string]any{"on-checkpoint": false, "max-size": "1MiB"}, rollPolicy{maxSize: 1 << 20, maxAge: time.Minute}},
	}
	for _, tc := range good {
		cfg := sdk.Config{"path": dir}
		if tc.roll != nil {
			cfg["roll"] = tc.roll
		}
		s := &FileSink{}
		if err := s.Open(sdktest.NewContext("sink", cfg, 0, 1)); err != nil {
			t.Fatalf("roll %v: %v", tc.roll, err)
		}
		if s.roll != tc.want {
			t.Fatalf("roll %v: policy %+v, want %+v", tc.roll, s.roll, tc.want)
		}
	}

	bad := []struct {
		roll any
		want string
	}{
		{"big", `file-sink: config "roll": want a mapping`},
		{map[string]any{"max-sze": "1MiB"}, "roll.max-sze: unknown key"},
		{map[string]any{"max-size": "12XB"}, `roll.max-size: "12XB" is not a size`},
		{map[string]any{"max-size": "MiB"}, `roll.max-size: "MiB" is not a size`},
		{map[string]any{"max-size": 0.0}, "roll.max-size: 0 is not a positive size"},
		{map[string]any{"max-size": -5}, "roll.max-size: -5 is not a positive size"},
		{map[string]any{"max-size": true}, "roll.max-size: want a size"},
		{map[string]any{"max-age": "soon"}, "roll.max-age: time: invalid duration"},
		{map[string]any{"max-age": 60.0}, "roll.max-age: want a duration"},
		{map[string]any{"max-age": "-1s"}, "roll.max-age: -1s is not positive"},
		{map[string]any{"max-age": "0s"}, "roll.max-age: 0s is not positive"},
		{map[string]any{"on-checkpoint": "sometimes"}, "roll.on-checkpoint: want true or false"},
		{map[string]any{"on-checkpoint": 1.0}, "roll.on-checkpoint: want true or false"},
	}
	for _, tc := range bad {
		err := (&FileSink{}).Open(sdktest.NewContext("sink", sdk.Config{"path": dir, "roll": tc.roll}, 0, 1))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("roll %v: Open: %v, want an error containing %q", tc.roll, err, tc.want)
		}
	}
}

// rollScenarios drive subtask 0 of a sink (parallelism 1) through steps:
//
//	write v…         records with key k and the given values
//	checkpoint N     the checkpoint's synchronous part (SnapshotState and
//	                 operator state), kept for restores
//	complete N       NotifyCheckpointComplete(N)
//	abort N          NotifyCheckpointAborted(N)
//	tick D           the clock moves by duration D
//	end              EndInput
//	restore N        the subtask crashes (no Close) and a new attempt
//	                 restores checkpoint N's state
//	visible f=v;v …  the committed files, exactly, with their values
//	clean            no uncommitted file (hidden file, upload) is left
var rollScenarios = []struct {
	name  string
	roll  map[string]any
	steps []string
}{
	{
		name: "default policy: one file per checkpoint, named after it",
		steps: []string{
			"write a b", "checkpoint 1", "visible", "complete 1", "visible part-0-1=a;b",
			"write c", "checkpoint 2", "complete 2", "visible part-0-1=a;b part-0-2=c", "clean",
		},
	},
	{
		name: "on-checkpoint alone is the default policy",
		roll: map[string]any{"on-checkpoint": true},
		steps: []string{
			"write a b", "checkpoint 1", "complete 1", "write c", "checkpoint 2", "complete 2",
			"visible part-0-1=a;b part-0-2=c", "clean",
		},
	},
	{
		name: "max-size rolls within an epoch",
		roll: map[string]any{"max-size": 8},
		steps: []string{
			"write a b c", "visible",
			"checkpoint 1", "visible", "complete 1", "visible part-0-1-0=a;b part-0-1-1=c",
			"write d", "checkpoint 2", "complete 2", "visible part-0-1-0=a;b part-0-1-1=c part-0-2-0=d", "clean",
		},
	},
	{
		name: "a record larger than max-size gets a file of its own",
		roll: map[string]any{"max-size": "4B"},
		steps: []string{
			"write a bbbbbbbbbbbbbbbbbbbb c", "checkpoint 1", "complete 1",
			"visible part-0-1-0=a part-0-1-1=bbbbbbbbbbbbbbbbbbbb part-0-1-2=c", "clean",
		},
	},
	{
		name: "without on-checkpoint a file outlives checkpoints until max-size",
		roll: map[string]any{"on-checkpoint": false, "max-size": "20B"},
		steps: []string{
			"write a b c", "checkpoint 1", "complete 1", "visible",
			"write d e", "visible", "write ffffffffff",
			"checkpoint 2", "visible", "complete 2", "visible part-0-1-0=a;b;c;d;e",
			"checkpoint 3", "complete 3", "visible part-0-1-0=a;b;c;d;e",
			"end", "checkpoint 4", "complete 4", "visible part-0-1-0=a;b;c;d;e part-0-2-0=ffffffffff", "clean",
		},
	},
	{
		name: "max-age rolls on the next record or snapshot",
		roll: map[string]any{"on-checkpoint": false, "max-age": "1m", "max-size": "1MiB"},
		steps: []string{
			"write a", "tick 30s", "checkpoint 1", "complete 1", "visible",
			"tick 30s", "write b", "visible", "checkpoint 2", "complete 2", "visible part-0-1-0=a",
			"tick 59s", "checkpoint 3", "complete 3", "visible part-0-1-0=a",
			"tick 1s", "checkpoint 4", "complete 4", "visible part-0-1-0=a part-0-2-0=b", "clean",
		},
	},
	{
		name: "max-age and max-size with on-checkpoint",
		roll: map[string]any{"max-age": "10s", "max-size": "12B"},
		steps: []string{
			"write a", "tick 10s", "write b c d", "tick 5s", "write e",
			"checkpoint 1", "complete 1", "visible part-0-1-0=a part-0-1-1=b;c;d part-0-1-2=e", "clean",
		},
	},
	{
		name: "restore in the middle of an in-progress file resumes it",
		roll: map[string]any{"on-checkpoint": false, "max-size": "20B"},
		steps: []string{
			"write a b c", "checkpoint 1", "complete 1", "write d e ffffffffff",
			"restore 1", "visible",
			"write d e ffffffffff", "checkpoint 2", "complete 2", "visible part-0-1-0=a;b;c;d;e",
			"end", "checkpoint 3", "complete 3", "visible part-0-1-0=a;b;c;d;e part-0-2-0=ffffffffff", "clean",
		},
	},
	{
		name: "restore from before the in-progress file was rolled and pre-committed",
		roll: map[string]any{"on-checkpoint": false, "max-size": "20B"},
		steps: []string{
			"write a b c", "checkpoint 1", "write d e", "checkpoint 2", "write ffffffffff gggggggggg",
			"restore 1", "visible",
			"write d e ffffffffff", "checkpoint 3", "complete 3", "visible part-0-1-0=a;b;c;d;e",
			"end", "checkpoint 4", "complete 4", "visible part-0-1-0=a;b;c;d;e part-0-2-0=ffffffffff", "clean",
		},
	},
	{
		name: "restoring the same checkpoint twice",
		roll: map[string]any{"on-checkpoint": false, "max-size": "20B"},
		steps: []string{
			"write a b c", "checkpoint 1", "write d xxxxxxxxxx", "restore 1", "write d yyyyyyyyyy", "restore 1",
			"write d e f", "checkpoint 2", "complete 2", "visible part-0-1-0=a;b;c;d;e",
			"end", "checkpoint 3", "complete 3", "visible part-0-1-0=a;b;c;d;e part-0-2-0=f", "clean",
		},
	},
	{
		name: "restore commits the pre-committed file and resumes the in-progress one",
		roll: map[string]any{"on-checkpoint": false, "max-size": "8B"},
		steps: []string{
			"write a b c", "checkpoint 1", "write d", "restore 1", "visible part-0-1-0=a;b",
			"write d", "end", "checkpoint 2", "complete 2", "visible part-0-1-0=a;b part-0-1-1=c;d", "clean",
		},
	},
	{
		name: "restore after the commit re-commits nothing twice",
		roll: map[string]any{"on-checkpoint": false, "max-size": "8B"},
		steps: []string{
			"write a b c", "checkpoint 1", "complete 1", "visible part-0-1-0=a;b",
			"write d", "restore 1", "visible part-0-1-0=a;b", "restore 1", "visible part-0-1-0=a;b",
			"write d", "end", "checkpoint 2", "complete 2", "visible part-0-1-0=a;b part-0-1-1=c;d", "clean",
		},
	},
	{
		name: "the age of a resumed file counts from when it was opened",
		roll: map[string]any{"on-checkpoint": false, "max-age": "1m", "max-size": "1MiB"},
		steps: []string{
			"write a", "tick 40s", "checkpoint 1", "write x", "restore 1", "tick 20s", "write b",
			"checkpoint 2", "complete 2", "visible part-0-1-0=a",
			"end", "checkpoint 3", "complete 3", "visible part-0-1-0=a part-0-2-0=b", "clean",
		},
	},
	{
		name: "files closed before an aborted checkpoint ride along with the next",
		roll: map[string]any{"max-size": 8},
		steps: []string{
			"write a b c", "checkpoint 1", "abort 1", "visible", "write d", "checkpoint 2", "complete 2",
			"visible part-0-1-0=a;b part-0-1-1=c part-0-2-0=d", "clean",
		},
	},
	{
		name: "an epoch without records makes no file",
		roll: map[string]any{"on-checkpoint": false, "max-size": "20B"},
		steps: []string{
			"checkpoint 1", "complete 1", "end", "checkpoint 2", "complete 2", "visible", "clean",
		},
	},
}

func TestFileSinkRolling(t *testing.T) {
	fake := blobtest.Fake(t)
	envs := []struct {
		name string
		make func(t *testing.T) *sinkEnv
	}{
		{"local", localEnv},
		// Parts of 8 bytes: most files span several parts and a tail.
		{"gofakes3", func(t *testing.T) *sinkEnv { return s3Env(t, "gofakes3", fake, 8) }},
	}
	for _, env := range envs {
		t.Run(env.name, func(t *testing.T) {
			for _, sc := range rollScenarios {
				t.Run(sc.name, func(t *testing.T) {
					runRollScenario(t, env.make(t), sc.roll, sc.steps)
				})
			}
		})
	}
}

// TestFileSinkRollingVersity runs the scenarios on a real S3 server, with
// its 5 MiB minimum part size: the small files are one part each, and
// in-progress files travel as a tail in the state.
func TestFileSinkRollingVersity(t *testing.T) {
	srv := blobtest.Versity(t)
	for _, sc := range rollScenarios {
		t.Run(sc.name, func(t *testing.T) {
			runRollScenario(t, s3Env(t, "versitygw", srv, 0), sc.roll, sc.steps)
		})
	}
}

func runRollScenario(t *testing.T, env *sinkEnv, roll map[string]any, steps []string) {
	t.Helper()
	cfg := sinkConfig(env.loc, roll)
	c := newClock()
	chk := t.TempDir()
	s := env.open(t, cfg, c, 0, 1)
	prev := map[int64][]*weirv1.SubtaskState{}
	attempt := 0
	for i, step := range steps {
		op, arg, _ := strings.Cut(step, " ")
		fields := strings.Fields(arg)
		id, _ := strconv.ParseInt(arg, 10, 64)
		var err error
		switch op {
		case "write":
			s.write(t, fields...)
		case "checkpoint":
			prev[id] = []*weirv1.SubtaskState{s.ctx.Checkpoint(t, s.sink, chk, id)}
		case "complete":
			err = s.sink.NotifyCheckpointComplete(id)
		case "abort":
			err = s.sink.NotifyCheckpointAborted(id)
		case "tick":
			d, perr := time.ParseDuration(arg)
			if perr != nil {
				t.Fatalf("bad step %q", step)
			}
			c.add(d)
		case "end":
			err = s.sink.EndInput(nil)
		case "restore":
			attempt++
			s = env.restore(t, cfg, c, 0, 1, attempt, id, prev[id])
		case "visible":
			want := map[string][]string{}
			for _, f := range fields {
				name, vals, _ := strings.Cut(f, "=")
				for _, v := range strings.Split(vals, ";") {
					want[name] = append(want[name], "k,"+v)
				}
			}
			if got := env.committed(t); !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d %q: committed files %v, want %v", i, step, got, want)
			}
		case "clean":
			if got := env.uncommitted(t); len(got) != 0 {
				t.Fatalf("step %d %q: uncommitted files left: %q", i, step, got)
			}
		default:
			t.Fatalf("bad step %q", step)
		}
		if err != nil {
			t.Fatalf("step %d %q: %v", i, step, err)
		}
	}
	if err := s.sink.Close(); err != nil {
		t.Fatal(err)
	}
}

// The state of a sink whose in-progress file outlives checkpoints holds
// that file exactly: locally its name and length, in S3 the upload, its
// parts and the tail (less than a part).
func TestFileSinkInProgressState(t *testing.T) {
	roll := map[string]any{"on-checkpoint": false, "max-size": "1MiB"}
	t.Run("local", func(t *testing.T) {
		env := localEnv(t)
		s := env.open(t, sinkConfig(env.loc, roll), newClock(), 0, 1)
		s.write(t, "a", "bb")
		st := snapshotState(t, s.sink, 1)
		ip := st.InProgress
		if ip == nil || ip.Name != "part-0-1-0" || ip.Size != 9 || !strings.HasPrefix(ip.Tmp, ".part-0-inprogress-") || ip.Upload != "" || len(ip.Tail) != 0 {
			t.Fatalf("in-progress state %+v", ip)
		}
	})
	t.Run("gofakes3", func(t *testing.T) {
		env := s3Env(t, "gofakes3", blobtest.Fake(t), 8)
		s := env.open(t, sinkConfig(env.loc, roll), newClock(), 0, 1)
		s.write(t, "a")
		st := snapshotState(t, s.sink, 1)
		if ip := st.InProgress; ip == nil || ip.Upload != "" || string(ip.Tail) != "k,a\n" || ip.Size != 4 || ip.Loc != env.loc+"/part-0-1-0" {
			t.Fatalf("in-progress state before the first part: %+v", ip)
		}
		s.write(t, "bb", "c")
		st = snapshotState(t, s.sink, 2)
		ip := st.InProgress
		if ip == nil || ip.Upload == "" || len(ip.Parts) != 1 || ip.Parts[0].N != 1 || ip.Parts[0].Size != 9 || string(ip.Tail) != "k,c\n" || ip.Size != 13 {
			t.Fatalf("in-progress state after a part: %+v", ip)
		}
		if got := env.uncommitted(t); !slices.Equal(got, []string{"part-0-1-0"}) {
			t.Fatalf("uploads %q, want the in-progress one", got)
		}
	})
}

func snapshotState(t *testing.T, s *FileSink, id int64) sinkState {
	t.Helper()
	if err := s.SnapshotState(id); err != nil {
		t.Fatal(err)
	}
	items := s.pending.Get()
	if len(items) != 1 {
		t.Fatalf("%d state items, want 1", len(items))
	}
	st, err := parseState(items[0])
	if err != nil {
		t.Fatal(err)
	}
	return st
}
