package check

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/blob/blobtest"
	"github.com/weirproject/weir/internal/blob/s3blob"
)

// Committed output is read the same from a directory and from S3: the
// visible files directly under the location, not hidden or nested ones,
// nor (in S3) an upload not completed.
func TestReadCommittedAt(t *testing.T) {
	files := map[string]string{
		"part-0-1":     "0,0\n0,3\n",
		"part-1-1-0":   "1,1\n",
		"part-1-2-0":   "2,2", // no newline at the end
		".part-0-2":    "9,9\n",
		"_SUCCESS":     "",
		"sub/part-0-3": "8,8\n",
	}
	want := []string{"0,0", "0,3", "1,1", "2,2"}
	ctx := context.Background()

	t.Run("local", func(t *testing.T) {
		dir := t.TempDir()
		for name, data := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := ReadCommittedAt(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("lines %q, want %q", got, want)
		}
	})

	t.Run("s3", func(t *testing.T) {
		srv := blobtest.Fake(t)
		srv.MakeBucket(t, "out")
		st, err := s3blob.New(srv.Config)
		if err != nil {
			t.Fatal(err)
		}
		old := blob.Default.S3
		blob.Default.S3 = st
		t.Cleanup(func() { blob.Default.S3 = old })
		for name, data := range files {
			if err := st.Put(ctx, "s3://out/job/"+name, strings.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
		}
		// Outside the prefix, and an upload never completed.
		if err := st.Put(ctx, "s3://out/job2/part-0-1", strings.NewReader("7,7\n"), 4); err != nil {
			t.Fatal(err)
		}
		c, err := minio.NewCore(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{Creds: credentials.NewStaticV4(blobtest.AccessKey, blobtest.SecretKey, ""), BucketLookup: minio.BucketLookupPath})
		if err != nil {
			t.Fatal(err)
		}
		id, err := c.NewMultipartUpload(ctx, "out", "job/part-0-4", minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutObjectPart(ctx, "out", "job/part-0-4", id, 1, bytes.NewReader([]byte("6,6\n")), 4, minio.PutObjectPartOptions{DisableContentSha256: true}); err != nil {
			t.Fatal(err)
		}
		for _, loc := range []string{"s3://out/job", "s3://out/job/"} {
			got, err := ReadCommittedAt(ctx, loc)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: lines %q, want %q in object name order", loc, got, want)
			}
		}
		if _, err := ReadCommittedAt(ctx, "gs://out/job"); err == nil {
			t.Fatal("read from an unsupported scheme: no error")
		}
	})
}
