// Package blobtest starts S3 servers for tests: versitygw, a real S3
// gateway over a directory run as its own process (built from the Go
// module proxy through the tools-only module deploy/s3), and gofakes3 in
// memory for fast unit tests.
package blobtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/freeport"
)

// Credentials of the test servers.
const (
	AccessKey = "weirtest"
	SecretKey = "weirtest-secret"
)

// Server is a running S3 server.
type Server struct {
	// Endpoint is http://127.0.0.1:port.
	Endpoint string
	// Config reaches it with the test credentials.
	Config blob.S3Config
	// Cmd is the server process (nil in process).
	Cmd *exec.Cmd
	// Dir is versitygw's data directory: a bucket is a directory in it.
	Dir string
}

// MakeBucket creates bucket.
func (s *Server) MakeBucket(t testing.TB, bucket string) {
	t.Helper()
	c, err := minio.New(s.Endpoint[len("http://"):], &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket %s: %v", bucket, err)
	}
}

// Fake serves gofakes3 (in memory) on loopback until the test ends.
func Fake(t testing.TB) *Server {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	return &Server{Endpoint: srv.URL, Config: config(srv.URL)}
}

// FakeUnconditional is Fake as a server that ignores If-None-Match (as
// S3 did before 2024, and some compatible servers still do).
func FakeUnconditional(t testing.TB) *Server {
	t.Helper()
	h := gofakes3.New(s3mem.New()).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("If-None-Match")
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &Server{Endpoint: srv.URL, Config: config(srv.URL)}
}

func config(endpoint string) blob.S3Config {
	return blob.S3Config{Endpoint: endpoint, Region: "us-east-1", AccessKey: AccessKey, SecretKey: SecretKey, PathStyle: "path"}
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// VersityBinary returns the path of a versitygw binary: $WEIR_VERSITYGW
// when set (`make test` builds it once for every package), else one built
// once per process into the user's cache (reused across runs: the first
// build takes minutes on 2 cores).
func VersityBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("WEIR_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("WEIR_VERSITYGW=%s: %v", p, err)
		}
		return p
	}
	buildOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		built = filepath.Join(cache, "weir", "versitygw-v1.8.0")
		if _, err := os.Stat(built); err == nil {
			return
		}
		_, file, _, _ := runtime.Caller(0)
		mod := filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "s3")
		if buildErr = os.MkdirAll(filepath.Dir(built), 0o755); buildErr != nil {
			return
		}
		tmp := fmt.Sprintf("%s.%d.tmp", built, os.Getpid())
		cmd := exec.Command("go", "build", "-trimpath", "-o", tmp, "github.com/versity/versitygw/cmd/versitygw")
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build versitygw in %s: %v\n%s", mod, err, out)
			return
		}
		buildErr = os.Rename(tmp, built)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// Versity starts versitygw over a fresh directory on a free loopback
// port, stopped when the test ends.
func Versity(t testing.TB) *Server {
	t.Helper()
	bin := VersityBinary(t)
	dir := t.TempDir()
	var lastErr error
	for range 5 {
		_, port, _ := net.SplitHostPort(freeport.Addr(t))
		p, _ := strconv.Atoi(port)
		s, err := StartVersity(bin, dir, p)
		if err == nil {
			t.Cleanup(func() { s.Stop() })
			return s
		}
		lastErr = err
	}
	t.Fatalf("start versitygw: %v", lastErr)
	return nil
}

// StartVersity starts versitygw serving dir on port and waits until it
// answers.
func StartVersity(bin, dir string, port int) (*Server, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--port", addr, "posix", dir)
	if testing.Verbose() {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return &Server{Endpoint: "http://" + addr, Config: config("http://" + addr), Cmd: cmd, Dir: dir}, nil
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("versitygw on %s exited: %v", addr, err)
		case <-deadline:
			cmd.Process.Kill()
			return nil, fmt.Errorf("versitygw on %s: not listening after 30s", addr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop kills the server.
func (s *Server) Stop() {
	if s.Cmd != nil && s.Cmd.Process != nil {
		s.Cmd.Process.Kill()
	}
}
