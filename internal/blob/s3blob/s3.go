// Package s3blob is checkpoint storage in an S3-compatible object store:
// blob.Store on minio-go, apart from package blob so that what only names
// locations (the checkpoint metadata, the state backends' handles) links
// no S3 client.
package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/weirproject/weir/internal/blob"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

const (
	defaultPartSize = 16 << 20
	// uploadThreads parts of one multipart upload are in flight (and in
	// memory) at once.
	uploadThreads = 2
)

// S3 is a store in S3-compatible object storage; locations are
// s3://bucket/key.
type S3 struct {
	client   *minio.Client
	endpoint string // for messages
	partSize uint64
	// unconditional: cfg.AllowUnconditionalCreate.
	unconditional bool

	// conditional records, per bucket, whether the server honours
	// If-None-Match: * on PUT (probed at the first PutIfAbsent).
	mu          sync.Mutex
	conditional map[string]bool
}

// NewS3 makes the client; it sends nothing until used.
func New(cfg blob.S3Config) (*S3, error) {
	endpoint, opts, err := ClientOptions(cfg)
	if err != nil {
		return nil, err
	}
	client, err := minio.New(endpoint, opts)
	if err != nil {
		return nil, fmt.Errorf("blob: S3 endpoint %s: %w", endpoint, err)
	}
	part := cfg.PartSize
	if part == 0 {
		part = defaultPartSize
	}
	return &S3{
		client: client, endpoint: client.EndpointURL().String(), partSize: part, conditional: map[string]bool{},
		unconditional: cfg.AllowUnconditionalCreate,
	}, nil
}

// ClientOptions are minio-go's endpoint and options for cfg, as NewS3
// uses them (requests counted in the storage metrics), for code that needs
// minio-go's lower-level API on the same store (the file sink's multipart
// uploads).
func ClientOptions(cfg blob.S3Config) (string, *minio.Options, error) {
	endpoint, secure := "s3.amazonaws.com", true
	if cfg.Region != "" && cfg.Endpoint == "" {
		endpoint = "s3." + cfg.Region + ".amazonaws.com"
	}
	if e := cfg.Endpoint; e != "" {
		if strings.Contains(e, "://") {
			u, err := url.Parse(e)
			if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return "", nil, fmt.Errorf("blob: S3 endpoint %q: want http://host:port, https://host or host:port", e)
			}
			endpoint, secure = u.Host, u.Scheme == "https"
		} else {
			endpoint = e
		}
	}
	lookup := minio.BucketLookupAuto
	switch cfg.PathStyle {
	case "", "auto":
		// minio-go's auto is virtual-hosted only for AWS and Google:
		// path-style for IPs, localhost and every other server.
	case "path":
		lookup = minio.BucketLookupPath
	case "virtual":
		lookup = minio.BucketLookupDNS
	default:
		return "", nil, fmt.Errorf("blob: S3 path style %q: want auto, path or virtual", cfg.PathStyle)
	}
	var creds *credentials.Credentials
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
	} else {
		creds = credentials.NewStatic("", "", "", credentials.SignatureAnonymous)
	}
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return "", nil, err
	}
	retries := cfg.MaxRetries
	if retries <= 0 {
		retries = 5
	}
	return endpoint, &minio.Options{
		Creds: creds, Secure: secure, Region: cfg.Region, BucketLookup: lookup,
		Transport: &countingTransport{next: tr}, MaxRetries: retries,
	}, nil
}

// split parses s3://bucket/key.
func split(loc string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(loc, "s3://")
	if !ok {
		return "", "", fmt.Errorf("blob: %s is not an s3:// location", loc)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("blob: %s: no bucket", loc)
	}
	return bucket, key, nil
}

// wrap names the endpoint, the location and the server's error code, and
// maps a missing object or bucket to fs.ErrNotExist.
func (s *S3) wrap(op, loc string, err error) error {
	if err == nil {
		return nil
	}
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case minio.NoSuchKey, "NotFound":
		return &fs.PathError{Op: op, Path: loc, Err: fs.ErrNotExist}
	case "":
		return fmt.Errorf("blob: %s %s on %s: %w", op, loc, s.endpoint, err)
	}
	return fmt.Errorf("blob: %s %s on %s: %s (%s): %w", op, loc, s.endpoint, resp.Code, resp.Message, err)
}

func (s *S3) putOptions() minio.PutObjectOptions {
	return minio.PutObjectOptions{
		PartSize: s.partSize, NumThreads: uploadThreads,
		// UNSIGNED-PAYLOAD instead of aws-chunked streaming signatures,
		// which some servers store as part of the object over plain HTTP.
		DisableContentSha256: true,
		ContentType:          "application/octet-stream",
	}
}

func (s *S3) Put(ctx context.Context, loc string, r io.Reader, size int64) error {
	bucket, key, err := split(loc)
	if err != nil {
		return err
	}
	_, err = s.client.PutObject(ctx, bucket, key, r, size, s.putOptions())
	return s.wrap("put", loc, err)
}

func (s *S3) PutIfAbsent(ctx context.Context, loc string, data []byte) error {
	bucket, key, err := split(loc)
	if err != nil {
		return err
	}
	cond, err := s.honoursIfNoneMatch(ctx, blob.Dir(loc))
	if err != nil {
		return err
	}
	if !cond {
		if !s.unconditional {
			return fmt.Errorf("%w: %s ignores If-None-Match on PUT, so %s cannot be created exactly once there (two writers racing could both succeed); use a server that honours conditional writes, or accept the risk with --s3-allow-unconditional-create",
				ErrUnconditional, s.endpoint, loc)
		}
		return s.createThenVerify(ctx, loc, data)
	}
	opts := s.putOptions()
	opts.SetMatchETagExcept("*")
	_, err = s.client.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)), opts)
	if code := minio.ToErrorResponse(err).Code; code == "PreconditionFailed" || code == "ConditionalRequestConflict" {
		return fmt.Errorf("%w: %s", blob.ErrExists, loc)
	}
	return s.wrap("put", loc, err)
}

// ErrUnconditional refuses a create-once write on a server that ignores
// If-None-Match, unless S3Config.AllowUnconditionalCreate accepts it.
var ErrUnconditional = errors.New("blob: the S3 server does not honour conditional writes")

// createThenVerify is PutIfAbsent for servers that ignore If-None-Match:
// it refuses an object that exists, writes, and reads the object back:
// content other than data means another writer raced it.
func (s *S3) createThenVerify(ctx context.Context, loc string, data []byte) error {
	if _, err := s.Stat(ctx, loc); err == nil {
		return fmt.Errorf("%w: %s", blob.ErrExists, loc)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := s.Put(ctx, loc, bytes.NewReader(data), int64(len(data))); err != nil {
		return err
	}
	r, err := s.Get(ctx, loc)
	if err != nil {
		return err
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		return s.wrap("get", loc, err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("%w: %s (written concurrently)", blob.ErrExists, loc)
	}
	return nil
}

// honoursIfNoneMatch probes, once per bucket, whether a conditional
// create on an existing object fails as it must.
func (s *S3) honoursIfNoneMatch(ctx context.Context, dir string) (bool, error) {
	bucket, _, err := split(dir)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	cond, known := s.conditional[bucket]
	s.mu.Unlock()
	if known {
		return cond, nil
	}
	probe := blob.Join(dir, fmt.Sprintf(".weir-probe-%d", time.Now().UnixNano()))
	_, pkey, _ := split(probe)
	opts := s.putOptions()
	opts.SetMatchETagExcept("*")
	if _, err := s.client.PutObject(ctx, bucket, pkey, bytes.NewReader(nil), 0, opts); err != nil {
		return false, s.wrap("put", probe, err)
	}
	_, err = s.client.PutObject(ctx, bucket, pkey, bytes.NewReader(nil), 0, opts)
	cond = err != nil && minio.ToErrorResponse(err).Code == "PreconditionFailed"
	if err != nil && !cond {
		return false, s.wrap("put", probe, err)
	}
	if err := s.Delete(ctx, probe); err != nil {
		return false, err
	}
	s.mu.Lock()
	s.conditional[bucket] = cond
	s.mu.Unlock()
	return cond, nil
}

// Get opens the object. Its first bytes are read here, which sends the
// one GET request, so a missing object fails now rather than at the first
// Read (minio-go's own Stat would cost a HEAD request more).
func (s *S3) Get(ctx context.Context, loc string) (io.ReadCloser, error) {
	bucket, key, err := split(loc)
	if err != nil {
		return nil, err
	}
	obj, err := s.client.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.wrap("get", loc, err)
	}
	r := &s3Reader{obj: obj, s: s, loc: loc, head: make([]byte, 0, 512)}
	n, err := io.ReadFull(obj, r.head[:cap(r.head)])
	r.head = r.head[:n]
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		r.eof = true
	case err != nil:
		obj.Close()
		return nil, s.wrap("get", loc, err)
	}
	return r, nil
}

// s3Reader serves the bytes Get read first, then the rest of the object,
// and names the location in read errors.
type s3Reader struct {
	obj  *minio.Object
	s    *S3
	loc  string
	head []byte
	eof  bool // the object ended within head
}

func (r *s3Reader) Read(p []byte) (int, error) {
	if len(r.head) > 0 {
		n := copy(p, r.head)
		r.head = r.head[n:]
		return n, nil
	}
	if r.eof {
		return 0, io.EOF
	}
	n, err := r.obj.Read(p)
	if err != nil && err != io.EOF {
		err = r.s.wrap("read", r.loc, err)
	}
	return n, err
}

func (r *s3Reader) Close() error { return r.obj.Close() }

func (s *S3) Stat(ctx context.Context, loc string) (blob.Info, error) {
	bucket, key, err := split(loc)
	if err != nil {
		return blob.Info{}, err
	}
	oi, err := s.client.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return blob.Info{}, s.wrap("stat", loc, err)
	}
	return blob.Info{Location: loc, Size: oi.Size, Modified: oi.LastModified}, nil
}

func (s *S3) Delete(ctx context.Context, loc string) error {
	bucket, key, err := split(loc)
	if err != nil {
		return err
	}
	return s.wrap("delete", loc, s.client.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{}))
}

func (s *S3) Mkdir(context.Context, string) error { return nil }

// List yields the objects whose keys start with dir's key and a slash.
func (s *S3) List(ctx context.Context, dir string) iter.Seq2[blob.Info, error] {
	return func(yield func(blob.Info, error) bool) {
		bucket, key, err := split(dir)
		if err != nil {
			yield(blob.Info{}, err)
			return
		}
		prefix := strings.TrimSuffix(key, "/") + "/"
		if key == "" {
			prefix = ""
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // stops the listing goroutine when the loop breaks
		for oi := range s.client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if oi.Err != nil {
				yield(blob.Info{}, s.wrap("list", dir, oi.Err))
				return
			}
			if !yield(blob.Info{Location: "s3://" + bucket + "/" + oi.Key, Size: oi.Size, Modified: oi.LastModified}, nil) {
				return
			}
		}
	}
}

// removeAll deletes every object under dir in batches.
func (s *S3) RemoveAll(ctx context.Context, dir string) error {
	bucket, _, err := split(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	objects := make(chan minio.ObjectInfo)
	var listErr error
	go func() {
		defer close(objects)
		for info, err := range s.List(ctx, dir) {
			if err != nil {
				listErr = err
				return
			}
			_, key, _ := split(info.Location)
			select {
			case objects <- minio.ObjectInfo{Key: key}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var errs []error
	for e := range s.client.RemoveObjects(ctx, bucket, objects, minio.RemoveObjectsOptions{}) {
		errs = append(errs, s.wrap("delete", "s3://"+bucket+"/"+e.ObjectName, e.Err))
	}
	// The channel closed: the lister is done, listErr is set if it failed.
	return errors.Join(append(errs, listErr)...)
}

// CheckBucket fails unless the bucket of loc exists and the credentials
// may use it, naming the endpoint, the bucket and the server's error code.
func (s *S3) CheckBucket(ctx context.Context, loc string) error {
	bucket, _, err := split(loc)
	if err != nil {
		return err
	}
	ok, err := s.client.BucketExists(ctx, bucket)
	if err != nil {
		var nerr net.Error
		if errors.As(err, &nerr) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("blob: S3 endpoint %s unreachable: %w", s.endpoint, err)
		}
		resp := minio.ToErrorResponse(err)
		return fmt.Errorf("blob: bucket %q on %s: %s (%s, HTTP %d)", bucket, s.endpoint, resp.Code, resp.Message, resp.StatusCode)
	}
	if !ok {
		return fmt.Errorf("blob: bucket %q on %s: NoSuchBucket (it does not exist)", bucket, s.endpoint)
	}
	return nil
}

// countingTransport counts and times every HTTP request the client sends,
// retries included.
type countingTransport struct{ next http.RoundTripper }

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := requestOp(req)
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	observe(op, result(resp, err), time.Since(start))
	return resp, err
}
