package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/blob/blobtest"
	"github.com/weirproject/weir/internal/blob/s3blob"
	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/state"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// writeSavepoint writes a savepoint of two vertices into a new directory:
// "counts" (Pebble, 2 subtasks: a value state per key, a map state on
// some keys) and "source" (heap: an operator list only).
func writeSavepoint(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "savepoint-job-7")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return writeSavepointAt(t, dir)
}

// writeSavepointAt writes writeSavepoint's savepoint into dir, a local
// directory or an s3:// location.
func writeSavepointAt(t *testing.T, dir string) string {
	t.Helper()
	const maxP = 8
	md := &weirv1.CheckpointMetadata{Version: 1, JobId: "job", CheckpointId: 7, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT, MaxParallelism: maxP}
	write := func(vertex string, kind weirv1.StateBackendConfig_Backend, p int, fill func(b state.Backend, owns func(string) bool)) {
		for i := range p {
			kgs := keygroup.RangeFor(maxP, p, i)
			b, err := state.New(state.Config{Kind: kind, MaxParallelism: maxP, KeyGroups: kgs, LocalDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			fill(b, func(k string) bool { return kgs.Contains(keygroup.Of([]byte(k), maxP)) })
			s, err := b.TakeSnapshot(state.SnapshotOptions{CheckpointID: 7, Canonical: true})
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.Write(dir, vertex, i, p)
			if err != nil {
				t.Fatal(err)
			}
			md.Subtasks = append(md.Subtasks, st)
		}
	}
	write("counts", weirv1.StateBackendConfig_BACKEND_PEBBLE, 2, func(b state.Backend, owns func(string) bool) {
		for _, k := range []string{"alice", "bob", "carol", "dave"} {
			if !owns(k) {
				continue
			}
			b.SetCurrentKey([]byte(k))
			b.ValueState("count").Update([]byte(k + "-count"))
			if k == "bob" || k == "carol" {
				b.MapState("seen").Put([]byte("x"), []byte{0xff, 0x00})
			}
		}
	})
	write("source", weirv1.StateBackendConfig_BACKEND_HEAP, 1, func(b state.Backend, _ func(string) bool) {
		b.ListState("position", false).Add([]byte("p1"))
	})
	if _, err := storage.WriteMetadata(dir, md); err != nil {
		t.Fatal(err)
	}
	return dir
}

// `weir state ls`, `dump` and `get` read a savepoint offline.
func TestStateCommands(t *testing.T) {
	dir := writeSavepoint(t)

	r := runCLI(t, nil, "", "state", "ls", dir)
	if r.code != 0 {
		t.Fatalf("ls: %d %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"savepoint 7 of job job, max parallelism 8",
		"counts  2", "count   value  4     4",
		"seen    map    2     2",
		"source  1", "position  list",
	} {
		if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("ls does not say %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t, nil, "", "state", "ls", dir, "-o", "json")
	var ls stateListing
	if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil || len(ls.Vertices) != 2 || ls.Vertices[0].KeyGroups != [2]int32{0, 7} {
		t.Fatalf("ls -o json: %v %+v\n%s", err, ls, r.stdout)
	}

	r = runCLI(t, nil, "", "state", "dump", dir)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 7 {
		t.Fatalf("dump: %d lines, code %d %s\n%s", len(lines), r.code, r.stderr, r.stdout)
	}
	var e dumpEntry
	for _, l := range lines {
		if strings.Contains(l, `"seen"`) {
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v, _ := base64.StdEncoding.DecodeString(e.ValueB64); e.Kind != "map" || e.UserKey != "x" || e.Value != "" || string(v) != "\xff\x00" || e.KeyGroup == nil {
		t.Errorf("a map entry with a binary value: %+v", e)
	}

	r = runCLI(t, nil, "", "state", "get", dir, "--vertex", "counts", "--state", "count", "--key", "carol")
	if r.code != 0 || !strings.Contains(r.stdout, `"value":"carol-count"`) || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("get carol: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "", "state", "get", dir, "--vertex", "counts", "--state", "seen", "--key-base64", base64.StdEncoding.EncodeToString([]byte("bob")), "--format", "csv")
	if r.code != 0 || !strings.Contains(r.stdout, "counts,") || !strings.Contains(r.stdout, ",seen,map,") {
		t.Errorf("get bob as CSV: %d %s %s", r.code, r.stdout, r.stderr)
	}

	// Bad input: a clear error, on stderr, and a failing exit code.
	truncated := filepath.Join(t.TempDir(), "_metadata")
	b, err := os.ReadFile(filepath.Join(dir, "_metadata"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(truncated, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"state", "ls", t.TempDir()}, "holds no checkpoint or savepoint"},
		{[]string{"state", "ls", truncated}, "is not a readable checkpoint or savepoint"},
		{[]string{"state", "dump", dir, "--vertex", "nope"}, `has no vertex "nope": it has counts, source`},
		{[]string{"state", "dump", dir, "--vertex", "counts", "--state", "cnt"}, `has no state "cnt" in vertex "counts": it has count, seen`},
		{[]string{"state", "get", dir, "--vertex", "counts", "--state", "count", "--key", "zed"}, `key "zed" has no entries`},
		{[]string{"state", "get", dir, "--state", "count", "--key", "zed"}, "get needs --vertex and --state"},
		{[]string{"state", "dump", dir, "--format", "xml"}, "want jsonl or csv"},
	} {
		r := runCLI(t, nil, "", c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: code %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// set, delete and bootstrap write new savepoints, leaving their input as
// it was; a dump bootstrapped back gives the same state, and the runtime
// restores what they write.
func TestStateWrites(t *testing.T) {
	dir := writeSavepoint(t)
	dump := func(path string) string {
		t.Helper()
		r := runCLI(t, nil, "", "state", "dump", path)
		if r.code != 0 {
			t.Fatalf("dump %s: %s", path, r.stderr)
		}
		return r.stdout
	}
	before := dump(dir)

	// The round trip.
	out := filepath.Join(t.TempDir(), "boot")
	if r := runCLI(t, nil, before, "state", "bootstrap", dir, "--from", "-", "--out", out); r.code != 0 {
		t.Fatalf("bootstrap: %s", r.stderr)
	}
	if got := dump(out); got != before {
		t.Errorf("a dump bootstrapped back dumps\n%s\nwant\n%s", got, before)
	}
	if dump(dir) != before {
		t.Fatal("bootstrap changed its input")
	}

	// set and delete.
	set := filepath.Join(t.TempDir(), "set")
	r := runCLI(t, nil, "", "state", "set", dir, "--out", set, "--vertex", "counts", "--state", "count", "--key", "erin", "--value", "erin-count")
	if r.code != 0 {
		t.Fatalf("set: %s", r.stderr)
	}
	del := filepath.Join(t.TempDir(), "del")
	if r := runCLI(t, nil, "", "state", "delete", set, "--out", del, "--vertex", "counts", "--state", "seen", "--key", "bob", "--user-key", "x"); r.code != 0 {
		t.Fatalf("delete: %s", r.stderr)
	}
	// The runtime restores it: erin's count is there, bob's map entry not.
	md, err := storage.ReadMetadata(del)
	if err != nil {
		t.Fatal(err)
	}
	var subtasks []*weirv1.SubtaskState
	for _, st := range md.GetSubtasks() {
		if st.GetVertex() == "counts" {
			subtasks = append(subtasks, st)
		}
	}
	b, err := state.New(state.Config{Kind: weirv1.StateBackendConfig_BACKEND_PEBBLE, MaxParallelism: 8, KeyGroups: keygroup.RangeFor(8, 1, 0), LocalDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Restore(subtasks, 0, 1); err != nil {
		t.Fatal(err)
	}
	b.SetCurrentKey([]byte("erin"))
	if v, ok := b.ValueState("count").Value(); !ok || string(v) != "erin-count" {
		t.Errorf("erin's count restored as %q, %v", v, ok)
	}
	b.SetCurrentKey([]byte("bob"))
	if b.MapState("seen").Contains([]byte("x")) {
		t.Error("bob's deleted map entry restored")
	}
	b.SetCurrentKey([]byte("carol"))
	if !b.MapState("seen").Contains([]byte("x")) {
		t.Error("carol's map entry lost")
	}

	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"state", "set", dir, "--out", out, "--vertex", "counts", "--state", "count", "--key", "k", "--value", "v"}, "is not empty"},
		{"", []string{"state", "delete", dir, "--out", filepath.Join(t.TempDir(), "x"), "--vertex", "counts", "--state", "count", "--key", "nobody"}, "nothing to delete"},
		{"", []string{"state", "set", dir, "--out", filepath.Join(t.TempDir(), "x"), "--vertex", "nope", "--state", "count", "--key", "k"}, `no vertex "nope"`},
		{`{"vertex":"nope","kind":"value","value_b64":""}`, []string{"state", "bootstrap", dir, "--from", "-", "--out", filepath.Join(t.TempDir(), "x")}, `vertex "nope" is not in`},
		{"{not json", []string{"state", "bootstrap", dir, "--from", "-", "--out", filepath.Join(t.TempDir(), "x")}, "line 1: not a line of weir state dump"},
		{`{"vertex":"counts","kind":"value","key_b64":"!!","value_b64":""}`, []string{"state", "bootstrap", dir, "--from", "-", "--out", filepath.Join(t.TempDir(), "x")}, "key_b64"},
	} {
		r := runCLI(t, nil, c.stdin, c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: code %d, stderr %q, want %q", c.args[:2], r.code, r.stderr, c.want)
		}
	}
}

// The reading commands read a savepoint on S3, reached as the AWS
// environment variables say; the writing ones write to local disk only.
func TestStateOnS3(t *testing.T) {
	srv := blobtest.Fake(t)
	srv.MakeBucket(t, "ckpt")
	s3, err := s3blob.New(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	blob.Default.S3 = s3
	t.Cleanup(func() { blob.Default.S3, blob.Default.S3Config = nil, nil })
	dir := writeSavepointAt(t, "s3://ckpt/savepoints/savepoint-job-7")
	blob.Default.S3 = nil // the CLI configures its own

	env := map[string]string{"AWS_ENDPOINT_URL": srv.Endpoint, "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": blobtest.AccessKey, "AWS_SECRET_ACCESS_KEY": blobtest.SecretKey}
	r := runCLI(t, env, "", "state", "get", dir, "--vertex", "counts", "--state", "count", "--key", "dave")
	if r.code != 0 || !strings.Contains(r.stdout, `"value":"dave-count"`) {
		t.Fatalf("get on S3: %d %s %s", r.code, r.stdout, r.stderr)
	}
	out := filepath.Join(t.TempDir(), "local")
	if r := runCLI(t, env, "", "state", "set", dir, "--out", out, "--vertex", "counts", "--state", "count", "--key", "dave", "--value", "5"); r.code != 0 {
		t.Fatalf("set from S3 to local: %s", r.stderr)
	}
	if r := runCLI(t, env, "", "state", "get", out, "--vertex", "counts", "--state", "count", "--key", "dave"); !strings.Contains(r.stdout, `"value":"5"`) {
		t.Errorf("the local copy: %s %s", r.stdout, r.stderr)
	}
	r = runCLI(t, env, "", "state", "set", dir, "--out", "s3://ckpt/edited", "--vertex", "counts", "--state", "count", "--key", "dave", "--value", "5")
	if r.code == 0 || !strings.Contains(r.stderr, "goes to a local directory") {
		t.Errorf("--out on S3: %d %s", r.code, r.stderr)
	}
}
