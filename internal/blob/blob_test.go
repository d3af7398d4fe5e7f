package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/blob/blobtest"
	"github.com/weirproject/weir/internal/blob/s3blob"
)

// stores are the stores every behaviour is checked on: the local file
// system, gofakes3 in memory, and versitygw, a real S3 server process;
// with unconditional, also gofakes3 ignoring If-None-Match (where
// PutIfAbsent falls back to create-then-verify, which only a single
// writer per object makes safe: checkpoint IDs are unique).
func stores(t *testing.T, unconditional bool) map[string]struct {
	st   blob.Store
	root string
} {
	out := map[string]struct {
		st   blob.Store
		root string
	}{"local": {blob.Local{}, t.TempDir()}}
	servers := map[string]*blobtest.Server{"gofakes3": blobtest.Fake(t), "versitygw": blobtest.Versity(t)}
	if unconditional {
		servers["gofakes3 without If-None-Match"] = blobtest.FakeUnconditional(t)
	}
	for name, srv := range servers {
		srv.MakeBucket(t, "weir-ck")
		cfg := srv.Config
		cfg.PartSize = 5 << 20 // the smallest S3 allows: multipart from 5 MiB
		cfg.AllowUnconditionalCreate = name == "gofakes3 without If-None-Match"
		s3, err := s3blob.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = struct {
			st   blob.Store
			root string
		}{s3, "s3://weir-ck/prefix"}
	}
	return out
}

func TestStores(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t, true) {
		t.Run(name, func(t *testing.T) {
			st, root := s.st, s.root
			small := []byte("hello")
			big := make([]byte, 11<<20+7) // three parts
			for i := range big {
				big[i] = byte(rand.IntN(256))
			}
			for loc, data := range map[string][]byte{
				blob.Join(root, "job", "chk-1", "a"):           small,
				blob.Join(root, "job", "shared", "big.sst"):    big,
				blob.Join(root, "job", "chk-1", "empty"):       nil,
				blob.Join(root, "job", "chk-2", "deep", "x"):   small,
				blob.Join(root, "other", "chk-1", "_metadata"): small,
			} {
				if err := st.Mkdir(ctx, blob.Dir(loc)); err != nil {
					t.Fatal(err)
				}
				if err := st.Put(ctx, loc, bytes.NewReader(data), int64(len(data))); err != nil {
					t.Fatalf("put %s: %v", loc, err)
				}
				got := read(t, st, loc)
				if !bytes.Equal(got, data) {
					t.Fatalf("%s: read %d bytes, want the %d written", loc, len(got), len(data))
				}
				info, err := st.Stat(ctx, loc)
				if err != nil || info.Size != int64(len(data)) {
					t.Fatalf("stat %s: %+v %v", loc, info, err)
				}
			}
			// Replaced whole.
			a := blob.Join(root, "job", "chk-1", "a")
			if err := st.Put(ctx, a, strings.NewReader("bye"), 3); err != nil {
				t.Fatal(err)
			}
			if got := read(t, st, a); string(got) != "bye" {
				t.Fatalf("after a second put: %q", got)
			}

			// Missing objects, and a missing directory (an aborted
			// checkpoint's, say) is not made by a put into it.
			if blob.IsLocal(root) {
				gone := blob.Join(root, "job", "chk-9", "x")
				if err := st.Put(ctx, gone, strings.NewReader("x"), 1); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("put into a missing directory: %v", err)
				}
			}
			missing := blob.Join(root, "job", "nope")
			if _, err := st.Get(ctx, missing); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("get missing: %v", err)
			}
			if _, err := st.Stat(ctx, missing); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("stat missing: %v", err)
			}
			if err := st.Delete(ctx, missing); err != nil {
				t.Fatalf("delete missing: %v", err)
			}

			// Created once.
			md := blob.Join(root, "job", "chk-3", "_metadata")
			if err := st.Mkdir(ctx, blob.Dir(md)); err != nil {
				t.Fatal(err)
			}
			if err := st.PutIfAbsent(ctx, md, []byte("first")); err != nil {
				t.Fatal(err)
			}
			if err := st.PutIfAbsent(ctx, md, []byte("second")); !errors.Is(err, blob.ErrExists) {
				t.Fatalf("second create: %v, want ErrExists", err)
			}
			if got := read(t, st, md); string(got) != "first" {
				t.Fatalf("after a refused create: %q", got)
			}

			// Listed at every depth, only under the directory.
			var listed []string
			for info, err := range st.List(ctx, blob.Join(root, "job")) {
				if err != nil {
					t.Fatal(err)
				}
				listed = append(listed, strings.TrimPrefix(info.Location, blob.Join(root, "job")+"/"))
			}
			slices.Sort(listed)
			want := []string{"chk-1/a", "chk-1/empty", "chk-2/deep/x", "chk-3/_metadata", "shared/big.sst"}
			if !slices.Equal(listed, want) {
				t.Fatalf("listed %v, want %v", listed, want)
			}
			if err := blob.DeleteAllIn(ctx, st, blob.Join(root, "job")); err != nil {
				t.Fatal(err)
			}
			for info, err := range st.List(ctx, blob.Join(root, "job")) {
				t.Fatalf("left after deleting everything: %v %v", info, err)
			}
			if got := read(t, st, blob.Join(root, "other", "chk-1", "_metadata")); string(got) != "hello" {
				t.Fatalf("deleting one job's objects touched another's: %q", got)
			}
		})
	}
}

func read(t *testing.T, st blob.Store, loc string) []byte {
	t.Helper()
	r, err := st.Get(context.Background(), loc)
	if err != nil {
		t.Fatalf("get %s: %v", loc, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", loc, err)
	}
	return b
}

// TestPutIfAbsentRace: of writers racing to create one object, exactly
// one wins, and the object is the winner's.
func TestPutIfAbsentRace(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t, false) {
		t.Run(name, func(t *testing.T) {
			loc := blob.Join(s.root, "race", "_metadata")
			if err := s.st.Mkdir(ctx, blob.Dir(loc)); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Go(func() { errs[i] = s.st.PutIfAbsent(ctx, loc, []byte{byte(i)}) })
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("writers %d and %d both created %s", winner, i, loc)
				case err == nil:
					winner = i
				case !errors.Is(err, blob.ErrExists):
					t.Fatalf("writer %d: %v", i, err)
				}
			}
			if got := read(t, s.st, loc); winner < 0 || !bytes.Equal(got, []byte{byte(winner)}) {
				t.Fatalf("winner %d, object %v", winner, got)
			}
		})
	}
}

func TestLocations(t *testing.T) {
	for _, tc := range []struct{ loc, scheme, joined, dir, base string }{
		{"/ck/job", "", "/ck/job/chk-1/x", "/ck", "job"},
		{"file:///ck/job", "", "/ck/job/chk-1/x", "/ck", "job"},
		{"s3://bucket/prefix/job", "s3", "s3://bucket/prefix/job/chk-1/x", "s3://bucket/prefix", "job"},
		{"s3://bucket", "s3", "s3://bucket/chk-1/x", "s3://.", "bucket"},
		{"relative/dir", "", "relative/dir/chk-1/x", "relative", "dir"},
	} {
		if got := blob.Scheme(tc.loc); got != tc.scheme {
			t.Errorf("Scheme(%q) = %q, want %q", tc.loc, got, tc.scheme)
		}
		if got := blob.Join(tc.loc, "chk-1", "x"); got != tc.joined {
			t.Errorf("Join(%q) = %q, want %q", tc.loc, got, tc.joined)
		}
		if tc.dir != "s3://." {
			if got := blob.Dir(tc.loc); got != tc.dir {
				t.Errorf("Dir(%q) = %q, want %q", tc.loc, got, tc.dir)
			}
		}
		if got := blob.Base(tc.loc); got != tc.base {
			t.Errorf("Base(%q) = %q, want %q", tc.loc, got, tc.base)
		}
	}
	for _, loc := range []string{"gs://b/x", "hdfs://nn/x", "S3A://b/x"} {
		if _, err := (&blob.Stores{}).Open(loc); err == nil || !strings.Contains(err.Error(), "unsupported storage scheme") {
			t.Errorf("Open(%q) = %v, want an unsupported scheme", loc, err)
		}
	}
	if _, err := (&blob.Stores{}).Open("s3://b/x"); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("s3 without configuration: %v", err)
	}
}

// TestCheckBucket: a missing bucket, wrong credentials and an unreachable
// endpoint fail with the endpoint, the bucket and the server's code.
func TestCheckBucket(t *testing.T) {
	srv := blobtest.Versity(t)
	srv.MakeBucket(t, "weir-ck")
	ctx := context.Background()
	check := func(cfg blob.S3Config, loc string) error {
		s3, err := s3blob.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s3.CheckBucket(ctx, loc)
	}
	if err := check(srv.Config, "s3://weir-ck/prefix"); err != nil {
		t.Fatalf("the bucket exists: %v", err)
	}
	wrong := srv.Config
	wrong.SecretKey = "not-the-secret"
	unreachable := srv.Config
	unreachable.Endpoint = "http://127.0.0.1:1"
	unreachable.MaxRetries = 1
	for _, tc := range []struct {
		name string
		cfg  blob.S3Config
		loc  string
		want []string
	}{
		{"missing bucket", srv.Config, "s3://nobucket/x", []string{`"nobucket"`, srv.Endpoint, "NoSuchBucket"}},
		{"wrong credentials", wrong, "s3://weir-ck/x", []string{`"weir-ck"`, srv.Endpoint, "HTTP 403"}},
		{"unreachable", unreachable, "s3://weir-ck/x", []string{"127.0.0.1:1", "unreachable"}},
	} {
		err := check(tc.cfg, tc.loc)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to name %s", tc.name, err, w)
			}
		}
	}
}

// TestRequestMetrics: every request is counted by operation and result.
func TestRequestMetrics(t *testing.T) {
	srv := blobtest.Fake(t)
	srv.MakeBucket(t, "weir-ck")
	s3, err := s3blob.New(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s3blob.Collectors()...)
	before := testutil.ToFloat64(counter(t, reg, "put", "ok"))
	ctx := context.Background()
	if err := s3.Put(ctx, "s3://weir-ck/m/x", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s3.Stat(ctx, "s3://weir-ck/m/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(counter(t, reg, "put", "ok")) - before; got != 1 {
		t.Errorf("put ok counted %v times, want 1", got)
	}
	if got := testutil.ToFloat64(counter(t, reg, "stat", "not-found")); got < 1 {
		t.Errorf("stat not-found counted %v times", got)
	}
	// Reading an object is one GET, no HEAD before it.
	stats, gets := testutil.ToFloat64(counter(t, reg, "stat", "ok")), testutil.ToFloat64(counter(t, reg, "get", "ok"))
	if got := string(read(t, s3, "s3://weir-ck/m/x")); got != "x" {
		t.Fatalf("read %q", got)
	}
	if d := testutil.ToFloat64(counter(t, reg, "stat", "ok")) - stats; d != 0 {
		t.Errorf("a read sent %v HEAD requests", d)
	}
	if d := testutil.ToFloat64(counter(t, reg, "get", "ok")) - gets; d != 1 {
		t.Errorf("a read sent %v GET requests, want 1", d)
	}
}

func counter(t *testing.T, reg *prometheus.Registry, op, result string) prometheus.Collector {
	t.Helper()
	for _, c := range s3blob.Collectors() {
		if v, ok := c.(*prometheus.CounterVec); ok {
			return v.WithLabelValues(op, result)
		}
	}
	t.Fatal("no request counter")
	return nil
}

// noLinks is a file system without hard links.
type noLinks struct{ vfs.FS }

func (noLinks) Link(string, string) error { return errors.New("operation not supported") }

// TestPutIfAbsentWithoutHardLinks: on a file system that cannot link,
// the object is still created whole, once.
func TestPutIfAbsentWithoutHardLinks(t *testing.T) {
	st := blob.Local{FS: noLinks{vfs.Default}}
	loc := blob.Join(t.TempDir(), "_metadata")
	ctx := context.Background()
	if err := st.PutIfAbsent(ctx, loc, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := st.PutIfAbsent(ctx, loc, []byte("second")); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	if got := read(t, st, loc); string(got) != "first" {
		t.Fatalf("object %q", got)
	}
	entries, _ := os.ReadDir(blob.Dir(loc))
	if len(entries) != 1 {
		t.Fatalf("left %d files, want only the object", len(entries))
	}
}

// TestReserveFill: a reserved object is empty until filled, filled once,
// and a fill without a reservation creates nothing.
func TestReserveFill(t *testing.T) {
	st := blob.Local{}
	ctx := context.Background()
	dir := blob.Join(t.TempDir(), "chk-1")
	if err := st.Mkdir(ctx, dir); err != nil {
		t.Fatal(err)
	}
	loc := blob.Join(dir, "_metadata")
	if err := st.Fill(ctx, loc, []byte("early")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("fill before the reservation: %v, want not exist", err)
	}
	if ok, _ := blob.Exists(ctx, loc); ok {
		t.Fatal("a fill without a reservation created the object")
	}
	if err := st.Reserve(ctx, loc); err != nil {
		t.Fatal(err)
	}
	if got := read(t, st, loc); len(got) != 0 {
		t.Fatalf("reserved object holds %q", got)
	}
	if err := st.Reserve(ctx, loc); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("second reservation: %v, want ErrExists", err)
	}
	if err := st.Fill(ctx, loc, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := st.Fill(ctx, loc, []byte("second")); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("second fill: %v, want ErrExists", err)
	}
	if err := st.PutIfAbsent(ctx, loc, []byte("third")); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("put over a filled reservation: %v, want ErrExists", err)
	}
	if got := read(t, st, loc); string(got) != "first" {
		t.Fatalf("object %q, want the first fill", got)
	}
}

// TestUnconditionalServerRefused: on a server that ignores If-None-Match
// a create-once write is refused, naming the flag that accepts the risk,
// unless the configuration accepted it.
func TestUnconditionalServerRefused(t *testing.T) {
	srv := blobtest.FakeUnconditional(t)
	srv.MakeBucket(t, "weir-ck")
	s3, err := s3blob.New(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	err = s3.PutIfAbsent(context.Background(), "s3://weir-ck/job/chk-1/_metadata", []byte("x"))
	if !errors.Is(err, s3blob.ErrUnconditional) || !strings.Contains(err.Error(), "--s3-allow-unconditional-create") {
		t.Fatalf("create-once on a server without conditional writes: %v", err)
	}
}
