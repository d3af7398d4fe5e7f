package filesink

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/blob/s3blob"
	"github.com/weirproject/weir/internal/fault"
)

// S3Config returns how file-sink reaches S3 for s3:// paths, and whether
// S3 is configured at all (false makes such a path fail at Open): the
// configuration the daemon gave checkpoint storage (blob.Default), else
// the environment: WEIR_S3_ENDPOINT, WEIR_S3_REGION, WEIR_S3_PATH_STYLE,
// WEIR_S3_ACCESS_KEY_ID and WEIR_S3_SECRET_ACCESS_KEY (the daemons'
// --s3-* flags as environment variables), then the AWS_* variables of
// blob.S3Config.FromEnv for what those leave empty. Tests replace it.
var S3Config = func() (blob.S3Config, bool) {
	if c := blob.Default.S3Config; c != nil {
		return *c, true
	}
	return s3ConfigFromEnv()
}

func s3ConfigFromEnv() (blob.S3Config, bool) {
	cfg := blob.S3Config{
		Endpoint:  os.Getenv("WEIR_S3_ENDPOINT"),
		Region:    os.Getenv("WEIR_S3_REGION"),
		PathStyle: os.Getenv("WEIR_S3_PATH_STYLE"),
		AccessKey: os.Getenv("WEIR_S3_ACCESS_KEY_ID"),
		SecretKey: os.Getenv("WEIR_S3_SECRET_ACCESS_KEY"),
	}.FromEnv()
	ok := cfg.Endpoint != "" || cfg.Region != "" || cfg.AccessKey != "" || cfg.SecretKey != "" || blob.Default.S3 != nil
	return cfg, ok
}

const (
	// s3PartSize is the part size of file-sink's multipart uploads, the
	// size of its buffer: S3's minimum for every part but the last.
	s3PartSize = 5 << 20
	// s3MaxParts is S3's limit of parts per upload.
	s3MaxParts = 10000
	// s3Timeout bounds one S3 request, retries included.
	s3Timeout = 5 * time.Minute
)

// errNoSuchUpload is the error of a multipart upload that does not exist:
// completed or aborted.
var errNoSuchUpload = errors.New("no such multipart upload")

// s3Part is an uploaded part of a multipart upload.
type s3Part struct {
	N    int    `json:"n"`
	ETag string `json:"etag"`
	Size int64  `json:"size"`
}

// s3Upload is an incomplete multipart upload.
type s3Upload struct {
	Key, UploadID string
}

// multipartStore is the S3 multipart upload API file-sink uses. Errors
// for a missing upload match errNoSuchUpload, for a missing object
// fs.ErrNotExist.
type multipartStore interface {
	bucketExists(ctx context.Context, bucket string) error
	startUpload(ctx context.Context, bucket, key string) (uploadID string, err error)
	uploadPart(ctx context.Context, bucket, key, uploadID string, n int, data []byte) (etag string, err error)
	completeUpload(ctx context.Context, bucket, key, uploadID string, parts []s3Part) error
	abortUpload(ctx context.Context, bucket, key, uploadID string) error
	// listUploads returns the incomplete uploads of the keys under prefix.
	listUploads(ctx context.Context, bucket, prefix string) ([]s3Upload, error)
	listParts(ctx context.Context, bucket, key, uploadID string) ([]s3Part, error)
	// statObject returns the size of an object.
	statObject(ctx context.Context, bucket, key string) (int64, error)
}

// s3Clients caches one client per configuration: its connections are
// shared by the subtasks of the process.
var s3Clients sync.Map // blob.S3Config → *minioMultipart

// multipartFor returns the client of cfg.
func multipartFor(cfg blob.S3Config) (*minioMultipart, error) {
	if c, ok := s3Clients.Load(cfg); ok {
		return c.(*minioMultipart), nil
	}
	c, err := newMinioMultipart(cfg)
	if err != nil {
		return nil, err
	}
	actual, _ := s3Clients.LoadOrStore(cfg, c)
	return actual.(*minioMultipart), nil
}

// minioMultipart is multipartStore over minio-go's low-level API.
type minioMultipart struct {
	core     *minio.Core
	endpoint string // for messages
}

// newMinioMultipart makes the client the way blob.NewS3 does.
func newMinioMultipart(cfg blob.S3Config) (*minioMultipart, error) {
	endpoint, opts, err := s3blob.ClientOptions(cfg)
	if err != nil {
		return nil, fmt.Errorf("file-sink: %w", err)
	}
	core, err := minio.NewCore(endpoint, opts)
	if err != nil {
		return nil, fmt.Errorf("file-sink: S3 endpoint %s: %w", endpoint, err)
	}
	return &minioMultipart{core: core, endpoint: core.EndpointURL().String()}, nil
}

// wrap names the operation, the object and the endpoint, and maps the
// server's error codes to errNoSuchUpload and fs.ErrNotExist.
func (m *minioMultipart) wrap(op, bucket, key string, err error) error {
	if err == nil {
		return nil
	}
	loc := "s3://" + bucket + "/" + key
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "NoSuchUpload":
		return fmt.Errorf("%s %s on %s: %w", op, loc, m.endpoint, errNoSuchUpload)
	case minio.NoSuchKey, "NotFound":
		return &fs.PathError{Op: op, Path: loc, Err: fs.ErrNotExist}
	case "":
		return fmt.Errorf("%s %s on %s: %w", op, loc, m.endpoint, err)
	}
	return fmt.Errorf("%s %s on %s: %s (%s): %w", op, loc, m.endpoint, resp.Code, resp.Message, err)
}

func (m *minioMultipart) bucketExists(ctx context.Context, bucket string) error {
	ok, err := m.core.BucketExists(ctx, bucket)
	if err != nil {
		return m.wrap("check bucket", bucket, "", err)
	}
	if !ok {
		return fmt.Errorf("bucket %q on %s: NoSuchBucket (it does not exist)", bucket, m.endpoint)
	}
	return nil
}

func (m *minioMultipart) startUpload(ctx context.Context, bucket, key string) (string, error) {
	id, err := m.core.NewMultipartUpload(ctx, bucket, key, minio.PutObjectOptions{ContentType: "text/plain; charset=utf-8"})
	return id, m.wrap("start upload", bucket, key, err)
}

func (m *minioMultipart) uploadPart(ctx context.Context, bucket, key, uploadID string, n int, data []byte) (string, error) {
	sum := md5.Sum(data)
	p, err := m.core.PutObjectPart(ctx, bucket, key, uploadID, n, bytes.NewReader(data), int64(len(data)), minio.PutObjectPartOptions{
		// Content-MD5 guards the part; UNSIGNED-PAYLOAD instead of
		// aws-chunked streaming signatures, as blob does.
		Md5Base64:            base64.StdEncoding.EncodeToString(sum[:]),
		DisableContentSha256: true,
	})
	if err != nil {
		return "", m.wrap(fmt.Sprintf("upload part %d of", n), bucket, key, err)
	}
	return p.ETag, nil
}

func (m *minioMultipart) completeUpload(ctx context.Context, bucket, key, uploadID string, parts []s3Part) error {
	cp := make([]minio.CompletePart, len(parts))
	for i, p := range parts {
		cp[i] = minio.CompletePart{PartNumber: p.N, ETag: p.ETag}
	}
	_, err := m.core.CompleteMultipartUpload(ctx, bucket, key, uploadID, cp, minio.PutObjectOptions{})
	return m.wrap("complete upload", bucket, key, err)
}

func (m *minioMultipart) abortUpload(ctx context.Context, bucket, key, uploadID string) error {
	return m.wrap("abort upload", bucket, key, m.core.AbortMultipartUpload(ctx, bucket, key, uploadID))
}

func (m *minioMultipart) listUploads(ctx context.Context, bucket, prefix string) ([]s3Upload, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []s3Upload
	for u := range m.core.ListIncompleteUploads(ctx, bucket, prefix, true) {
		if u.Err != nil {
			err := m.wrap("list uploads", bucket, prefix, u.Err)
			if errors.Is(err, errNoSuchUpload) {
				// gofakes3's answer for a bucket that never had an upload.
				return nil, nil
			}
			return nil, err
		}
		out = append(out, s3Upload{Key: u.Key, UploadID: u.UploadID})
	}
	return out, nil
}

func (m *minioMultipart) listParts(ctx context.Context, bucket, key, uploadID string) ([]s3Part, error) {
	var out []s3Part
	marker := 0
	for {
		res, err := m.core.ListObjectParts(ctx, bucket, key, uploadID, marker, 1000)
		if err != nil {
			return nil, m.wrap("list parts of", bucket, key, err)
		}
		for _, p := range res.ObjectParts {
			out = append(out, s3Part{N: p.PartNumber, ETag: p.ETag, Size: p.Size})
		}
		if !res.IsTruncated || res.NextPartNumberMarker <= marker {
			return out, nil
		}
		marker = res.NextPartNumberMarker
	}
}

func (m *minioMultipart) statObject(ctx context.Context, bucket, key string) (int64, error) {
	oi, err := m.core.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return 0, m.wrap("stat", bucket, key, err)
	}
	return oi.Size, nil
}

// s3Store keeps part files as objects under an S3 prefix: an in-progress
// file is a multipart upload, which completing commits.
type s3Store struct {
	f      *FileSink
	mp     multipartStore
	bucket string
	prefix string // the keys' prefix: "" or ending in "/"
}

// openS3 connects to the bucket of loc, s3://bucket/prefix.
func (f *FileSink) openS3(loc string) (*s3Store, error) {
	bucket, key, _ := strings.Cut(loc[len("s3://"):], "/")
	if bucket == "" {
		return nil, fmt.Errorf("file-sink: config path %q: no bucket (want s3://bucket/prefix)", loc)
	}
	s := &s3Store{f: f, mp: f.mp, bucket: bucket}
	if key = strings.Trim(key, "/"); key != "" {
		s.prefix = key + "/"
	}
	if s.mp == nil {
		cfg, ok := S3Config()
		if !ok {
			return nil, fmt.Errorf("file-sink: config path %s: S3 is not configured (set WEIR_S3_ENDPOINT or AWS_ENDPOINT_URL and credentials)", loc)
		}
		mp, err := multipartFor(cfg)
		if err != nil {
			return nil, err
		}
		s.mp = mp
	}
	if f.partSize <= 0 {
		f.partSize = s3PartSize
	}
	ctx, cancel := context.WithTimeout(context.Background(), s3Timeout)
	defer cancel()
	if err := s.mp.bucketExists(ctx, bucket); err != nil {
		return nil, fmt.Errorf("file-sink: config path %s: %w", loc, err)
	}
	return s, nil
}

func (s *s3Store) loc(key string) string { return "s3://" + s.bucket + "/" + key }

// splitLoc parses the s3://bucket/key of a file in state.
func splitLoc(loc string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(loc, "s3://")
	bucket, key, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" || key == "" {
		return "", "", fmt.Errorf("file-sink: corrupt pending state: %q is no S3 object (state from a local directory?)", loc)
	}
	return bucket, key, nil
}

func (s *s3Store) create(name string, renamable bool) (partFile, error) {
	return &s3File{s: s, bucket: s.bucket, key: s.prefix + name, name: name, renamable: renamable}, nil
}

// s3File is an in-progress part file: a multipart upload started when
// the first part is full (or the file is closed), and a buffer of less
// than a part.
type s3File struct {
	s           *s3Store
	bucket, key string
	name        string
	renamable   bool
	upload      string
	parts       []s3Part
	uploaded    int64
	buf         []byte
	closed      bool
}

func (w *s3File) size() int64 { return w.uploaded + int64(len(w.buf)) }
func (w *s3File) alive() bool { return !w.closed }

func (w *s3File) write(p []byte) error {
	w.buf = append(w.buf, p...)
	if len(w.buf) >= w.s.f.partSize {
		return w.uploadBuffer()
	}
	return nil
}

// uploadBuffer uploads the buffer as the next part, starting the upload
// first if needed.
func (w *s3File) uploadBuffer() error {
	ctx, cancel := context.WithTimeout(context.Background(), s3Timeout)
	defer cancel()
	if w.upload == "" {
		id, err := w.s.mp.startUpload(ctx, w.bucket, w.key)
		if err != nil {
			return err
		}
		w.upload, w.renamable = id, false
	}
	n := len(w.parts) + 1
	if n > s3MaxParts {
		return fmt.Errorf("part file %s: more than %d parts of %d bytes (set a lower roll.max-size)", w.s.loc(w.key), s3MaxParts, w.s.f.partSize)
	}
	etag, err := w.s.mp.uploadPart(ctx, w.bucket, w.key, w.upload, n, w.buf)
	if err != nil {
		return err
	}
	w.parts = append(w.parts, s3Part{N: n, ETag: etag, Size: int64(len(w.buf))})
	w.uploaded += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

func (w *s3File) state() partState {
	return partState{Name: w.name, Loc: w.s.loc(w.key), Upload: w.upload, Parts: slices.Clone(w.parts), Size: w.size()}
}

// persist uploads the buffer if it makes a part and keeps the rest in
// the state: a part may be uploaded only once it is full (or last).
func (w *s3File) persist() (partState, error) {
	if len(w.buf) >= w.s.f.partSize {
		if err := w.uploadBuffer(); err != nil {
			return partState{}, err
		}
	}
	st := w.state()
	st.Tail = slices.Clone(w.buf)
	return st, nil
}

// closeForCommit uploads the buffer as the last part. On an error the
// file stays usable, its bytes buffered: the next snapshot retries.
func (w *s3File) closeForCommit(name string) (partState, func() error, error) {
	if name != "" && w.renamable && w.upload == "" {
		w.name, w.key = name, w.s.prefix+name
	}
	if len(w.buf) > 0 || len(w.parts) == 0 {
		if err := w.uploadBuffer(); err != nil {
			return partState{}, nil, err
		}
	}
	w.closed, w.buf = true, nil
	return w.state(), nil, nil
}

// discard leaves the upload: a restore aborts it, or resumes it when a
// checkpoint holds it.
func (w *s3File) discard() error {
	w.closed, w.buf = true, nil
	return nil
}

// fromState is the in-progress file st.
func (s *s3Store) fromState(st partState) (*s3File, error) {
	bucket, key, err := splitLoc(st.Loc)
	if err != nil {
		return nil, err
	}
	w := &s3File{s: s, bucket: bucket, key: key, name: st.Name, upload: st.Upload, parts: slices.Clone(st.Parts), buf: slices.Clone(st.Tail)}
	for _, p := range w.parts {
		w.uploaded += p.Size
	}
	if w.size() != st.Size {
		return nil, fmt.Errorf("file-sink: corrupt pending state: %s: parts and tail hold %d bytes, the state says %d", st.Loc, w.size(), st.Size)
	}
	return w, nil
}

func (s *s3Store) resume(st partState) (partFile, error) {
	w, err := s.fromState(st)
	if err != nil {
		return nil, err
	}
	if w.upload != "" {
		// Parts the failed attempt uploaded after the checkpoint are
		// overwritten as the replayed records fill them again, and left
		// out of the completion anyway.
		ctx, cancel := context.WithTimeout(context.Background(), s3Timeout)
		defer cancel()
		if _, err := s.mp.listParts(ctx, w.bucket, w.key, w.upload); err != nil {
			if errors.Is(err, errNoSuchUpload) {
				return nil, fmt.Errorf("file-sink: resume the in-progress part file %s: its upload %s is gone: its records are lost: %w", st.Loc, w.upload, err)
			}
			return nil, fmt.Errorf("file-sink: resume the in-progress part file %s: %w", st.Loc, err)
		}
	}
	return w, nil
}

func (s *s3Store) commitInProgress(sub int, st partState) error {
	w, err := s.fromState(st)
	if err != nil {
		return err
	}
	if w.upload != "" && len(w.buf) > 0 {
		if err := w.uploadBuffer(); err != nil {
			if errors.Is(err, errNoSuchUpload) {
				// Completed by an earlier attempt of this restore, or lost:
				// commit tells.
				cst := w.state()
				cst.Checkpoint = st.Checkpoint
				return s.commit(sub, cst)
			}
			return fmt.Errorf("file-sink: commit the in-progress part file %s: %w", st.Loc, err)
		}
	}
	// A file of a tail only is uploaded again under the same name: the
	// same object if an earlier attempt of this restore committed it.
	cst, _, err := w.closeForCommit("")
	if err != nil {
		return fmt.Errorf("file-sink: commit the in-progress part file %s: %w", st.Loc, err)
	}
	cst.Checkpoint = st.Checkpoint
	return s.commit(sub, cst)
}

// commit completes the upload of st. An upload that no longer exists
// while its object does (of its size) was completed before.
func (s *s3Store) commit(sub int, st partState) error {
	f, id := s.f, st.Checkpoint
	bucket, key, err := splitLoc(st.Loc)
	if err != nil {
		return err
	}
	if st.Upload == "" {
		return fmt.Errorf("file-sink: corrupt pending state: %s has no upload", st.Loc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s3Timeout)
	defer cancel()
	err = s.mp.completeUpload(ctx, bucket, key, st.Upload, st.Parts)
	switch {
	case err == nil:
		// Visible; the later files of the same notification are not yet.
		if err := fault.Point(fault.SinkMidCommit); err != nil {
			return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, err)
		}
		return nil
	case errors.Is(err, errNoSuchUpload):
		size, serr := s.mp.statObject(ctx, bucket, key)
		switch {
		case errors.Is(serr, fs.ErrNotExist):
			return fmt.Errorf("file-sink: commit checkpoint %d: the epoch's records are lost: neither the upload %s nor the object %s exists: %w",
				id, st.Upload, st.Loc, fs.ErrNotExist)
		case serr != nil:
			return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, serr)
		case size != st.Size:
			return fmt.Errorf("file-sink: commit checkpoint %d: the upload %s is gone and the object %s holds %d bytes, not the %d uploaded",
				id, st.Upload, st.Loc, size, st.Size)
		}
		f.log.Info("file-sink: epoch already committed",
			"checkpoint_id", id, "subtask", sub, "object", st.Loc)
		return nil
	default:
		return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, err)
	}
}

// cleanup aborts the multipart uploads of subtask sub but keep's: the
// uploads after the restored checkpoint, never to be completed.
func (s *s3Store) cleanup(sub int, keep *partState) error {
	ctx, cancel := context.WithTimeout(context.Background(), s3Timeout)
	defer cancel()
	prefix := s.prefix + fmt.Sprintf("part-%d-", sub)
	ups, err := s.mp.listUploads(ctx, s.bucket, prefix)
	if err != nil {
		return fmt.Errorf("file-sink: %w", err)
	}
	aborted := 0
	for _, u := range ups {
		rest, ok := strings.CutPrefix(u.Key, prefix)
		if !ok || strings.Contains(rest, "/") || (keep != nil && u.UploadID == keep.Upload) {
			continue
		}
		if err := s.mp.abortUpload(ctx, s.bucket, u.Key, u.UploadID); err != nil && !errors.Is(err, errNoSuchUpload) {
			return fmt.Errorf("file-sink: %w", err)
		}
		aborted++
	}
	if aborted > 0 {
		s.f.log.Info("file-sink: aborted uncommitted multipart uploads", "subtask", sub, "uploads", aborted, "prefix", s.loc(prefix))
	}
	return nil
}
