package suite

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/weirproject/weir/bench/internal/harness"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// S3 measures checkpoints of ~1 GiB of keyed Pebble state (incremental
// backend) to S3 — versitygw on loopback, its data directory on the same
// disk — against the same checkpoints to the local disk, and against what
// minio-go itself uploads to the same server from the harness process
// (PutObject with Weir's options, the checkpoint's own SST sizes), in the
// same run.
//
// The job: state-load-source (p=2) → hash → random-state (p=2, Pebble,
// incremental), 2 TaskManagers × 1 slot, so each TaskManager holds one
// subtask with half of the state and uploads its files one after the
// other, as Weir does. It runs first on a cluster whose checkpoints go to
// the local disk, where the state is loaded (keys × 1 KiB random values);
// its last checkpoint is then restored on a second cluster whose
// checkpoints go to s3://weir-bench/checkpoints, which thus holds the
// same SST files. On each: one unmeasured checkpoint (the first uploads
// everything), full checkpoints (TriggerCheckpoint{full}: every file
// uploaded), then incremental ones, each after 1% of the keys were
// rewritten. Every checkpoint is taken with the daemons idle (no
// compaction running, dirty pages written back). On the S3 cluster each
// full checkpoint is followed by the floor: objects of the sizes of the
// SST files it uploaded, put by minio-go from distinct random data, as two
// streams (one per subtask, each sequential, as the TaskManagers do) and
// as one.
const (
	s3ValueBytes   = 1024
	s3DefaultBytes = 1 << 30
	s3QuickBytes   = 128 << 20
	s3Bucket       = "weir-bench"
	s3AccessKey    = "weirbench"
	s3SecretKey    = "weirbench-secret"
	s3Region       = "us-east-1"
	// s3PartSize and s3Threads are Weir's S3 upload options
	// (internal/blob/s3.go: defaultPartSize, uploadThreads); the floor
	// puts with the same options.
	s3PartSize = 16 << 20
	s3Threads  = 2
	mb         = 1e6
	mib        = 1 << 20
)

// s3Server is versitygw in its own process.
type s3Server struct {
	proc   *harness.Proc
	addr   string
	data   string
	client *minio.Client
}

func startVersity(e *Env, dir string) (*s3Server, error) {
	bin := filepath.Join(filepath.Dir(e.Bin.JobManager), "versitygw")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w (make bench builds it from deploy/s3)", err)
	}
	s := &s3Server{addr: harness.FreeAddr(), data: filepath.Join(dir, "data")}
	if err := os.MkdirAll(s.data, 0o755); err != nil {
		return nil, err
	}
	p, err := harness.Start("versitygw", bin, harness.LogPath(dir, "versitygw"), nil,
		"--access", s3AccessKey, "--secret", s3SecretKey, "--port", s.addr, "posix", s.data)
	if err != nil {
		return nil, err
	}
	s.proc = p
	err = harness.Poll(e.Ctx, 30*time.Second, 20*time.Millisecond, "versitygw listening", func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("versitygw exited: %s", p.Tail(2000))
		}
		c, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
	if err == nil {
		s.client, err = minio.New(s.addr, &minio.Options{
			Creds: credentials.NewStaticV4(s3AccessKey, s3SecretKey, ""), Region: s3Region, BucketLookup: minio.BucketLookupPath,
		})
	}
	if err == nil {
		err = s.client.MakeBucket(e.Ctx, s3Bucket, minio.MakeBucketOptions{Region: s3Region})
	}
	if err != nil {
		s.stop(e)
		return nil, err
	}
	return s, nil
}

func (s *s3Server) stop(e *Env) {
	if err := s.proc.Stop(10 * time.Second); err != nil {
		e.Logf("versitygw: %v", err)
	}
}

// putOptions are Weir's (internal/blob/s3.go putOptions).
func s3PutOptions() minio.PutObjectOptions {
	return minio.PutObjectOptions{PartSize: s3PartSize, NumThreads: s3Threads, DisableContentSha256: true, ContentType: "application/octet-stream"}
}

// s3Side is one cluster running the job: checkpoints to the local disk
// or to S3.
type s3Side struct {
	e     *Env
	name  string
	c     *harness.Cluster
	job   string
	dir   string // the source's control directory
	gen   *int64 // update generations, shared by both sides
	extra []int  // processes counted with the daemons (versitygw)
	bench string // the benchmark, in the log lines ("" for S3)
}

func (s *s3Side) label() string {
	if s.bench == "" {
		return "S3 " + s.name
	}
	return s.bench + " " + s.name
}

func s3Spec(name string, keys int64, dir, restore string) string {
	r := ""
	if restore != "" {
		r = "restore-from: " + strconv.Quote(restore) + "\n"
	}
	return fmt.Sprintf(`name: %s
%scheckpointing: {interval: 0s, mode: exactly-once, timeout: 10m, retained: 1, externalized: retain-on-cancellation}
restart-strategy: {type: none}
state: {backend: pebble, incremental: true}
vertices:
  - {name: source, operator: state-load-source, parallelism: 2, config: {keys: %d, dir: %s}}
  - {name: state, operator: random-state, parallelism: 2, inputs: [{from: source, partition: hash}], config: {value-bytes: %d}}
`, name, r, keys, strconv.Quote(dir), s3ValueBytes)
}

func (s *s3Side) recordsIn() (float64, error) {
	m, err := s.c.ScrapeTMs(s.e.Ctx)
	if err != nil {
		return 0, err
	}
	return m.Sum("weir_task_records_in_total", map[string]string{"job_id": s.job, "task_name": "state"}), nil
}

// cpu is the CPU time of the daemons and the extra processes.
func (s *s3Side) cpu() (daemons, extra time.Duration) {
	for _, p := range s.c.Pids() {
		t, _ := harness.CPUTime(p)
		daemons += t
	}
	for _, p := range s.extra {
		t, _ := harness.CPUTime(p)
		extra += t
	}
	return daemons, extra
}

// waitIdle waits until the daemons and extra processes use less than
// 0.05 cores over half a second (Pebble's compactions done, the
// JobManager done discarding), up to limit; it returns how long it took
// and whether they went idle.
func (s *s3Side) waitIdle(limit time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	for time.Since(start) < limit {
		d0, x0 := s.cpu()
		t0 := time.Now()
		if err := sleep(s.e, 500*time.Millisecond); err != nil {
			return 0, false, err
		}
		d1, x1 := s.cpu()
		if float64(d1-d0+x1-x0)/float64(time.Since(t0)) < 0.05 {
			return time.Since(start), true, nil
		}
	}
	return time.Since(start), false, nil
}

// idle writes back the dirty pages of the machine (sync(2)), so that no
// write-back of what the previous measurement wrote overlaps the next,
// then waits until the processes are idle.
func (s *s3Side) idle(what string) error {
	syscall.Sync()
	d, ok, err := s.waitIdle(2 * time.Minute)
	if err != nil {
		return err
	}
	if !ok {
		s.e.Logf("%s: daemons still busy %.0f s before %s; going on", s.label(), d.Seconds(), what)
	}
	return nil
}

// load waits until the state vertex received every key.
func (s *s3Side) load(keys int64) error {
	last := time.Now()
	return harness.Poll(s.e.Ctx, 20*time.Minute, 250*time.Millisecond, "the state loaded", func() (bool, error) {
		n, err := s.recordsIn()
		if err != nil {
			return false, err
		}
		if time.Since(last) >= 10*time.Second {
			last = time.Now()
			s.e.Logf("%s: loaded %.0f of %d keys", s.label(), n, keys)
		}
		return n >= float64(keys), nil
	})
}

// update asks the source for n records with random keys (each a new
// random value) and waits until the state vertex got them.
func (s *s3Side) update(n int64) error {
	before, err := s.recordsIn()
	if err != nil {
		return err
	}
	*s.gen++
	tmp := filepath.Join(s.dir, "updates.tmp")
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %d\n", *s.gen, n), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "updates")); err != nil {
		return err
	}
	return harness.Poll(s.e.Ctx, 2*time.Minute, 20*time.Millisecond, "the updates processed", func() (bool, error) {
		m, err := s.recordsIn()
		return m >= before+float64(n), err
	})
}

// s3Ckpt is one measured checkpoint.
type s3Ckpt struct {
	ID, Bytes, StateSize int64
	ExternalPath         string
	Client               time.Duration // TriggerCheckpoint call, which waits for completion
	Sync, Async          time.Duration // slowest subtask of the state vertex
	RSSBefore, RSSPeak   []int64       // per TaskManager
	DaemonCPU, ExtraCPU  time.Duration
	Foreign              float64            // CPU cores other processes of the host used meanwhile
	DiskRead             int64              // the TaskManagers read from disk (not from the page cache)
	Requests             map[string]float64 // TaskManagers' storage requests by op
	PutSeconds           float64            // time in put and put-part requests (to the response headers), summed over the TaskManagers
}

func (k s3Ckpt) throughput() float64 { return float64(k.Bytes) / mb / k.Async.Seconds() }

// diskRead is what the process read from the block devices (page cache
// misses), from /proc/<pid>/io.
func diskRead(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "read_bytes:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func statusBytes(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// checkpoint triggers one checkpoint, waits for it and measures it.
func (s *s3Side) checkpoint(full bool) (s3Ckpt, error) {
	var k s3Ckpt
	tms := s.c.LiveTMs()
	peaks := make([]int64, len(tms))
	for i, t := range tms {
		// Resets VmHWM to the current RSS (Linux ≥ 4.0).
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", t.Pid()), []byte("5"), 0)
		k.RSSBefore = append(k.RSSBefore, statusBytes(t.Pid(), "VmRSS"))
		peaks[i] = k.RSSBefore[i]
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for i, t := range tms {
				peaks[i] = max(peaks[i], statusBytes(t.Pid(), "VmRSS"))
			}
		}
	}()
	m0, err := s.c.ScrapeTMs(s.e.Ctx)
	if err != nil {
		close(stop)
		wg.Wait()
		return k, err
	}
	var r0 int64
	for _, t := range tms {
		r0 += diskRead(t.Pid())
	}
	d0, x0 := s.cpu()
	in := harness.StartInterference(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(s.e.Ctx, 15*time.Minute)
	t0 := time.Now()
	resp, err := s.c.Client.TriggerCheckpoint(ctx, &weirv1.TriggerCheckpointRequest{JobId: s.job, Full: full})
	k.Client = time.Since(t0)
	cancel()
	d1, x1 := s.cpu()
	k.Foreign, _ = in.Stop()
	close(stop)
	wg.Wait()
	if err != nil {
		return k, err
	}
	k.DaemonCPU, k.ExtraCPU = d1-d0, x1-x0
	for _, t := range tms {
		k.DiskRead += diskRead(t.Pid())
	}
	k.DiskRead -= r0
	for i, t := range tms {
		k.RSSPeak = append(k.RSSPeak, max(peaks[i], statusBytes(t.Pid(), "VmHWM")))
	}
	m1, err := s.c.ScrapeTMs(s.e.Ctx)
	if err != nil {
		return k, err
	}
	k.Requests = map[string]float64{}
	for _, op := range []string{"put", "put-part", "multipart-start", "multipart-complete", "stat", "get", "list", "delete"} {
		if d := m1.Sum("weir_storage_requests_total", map[string]string{"op": op}) - m0.Sum("weir_storage_requests_total", map[string]string{"op": op}); d > 0 {
			k.Requests[op] = d
		}
	}
	for _, op := range []string{"put", "put-part"} {
		l := map[string]string{"op": op}
		k.PutSeconds += m1.Sum("weir_storage_request_duration_seconds_sum", l) - m0.Sum("weir_storage_request_duration_seconds_sum", l)
	}
	k.ID, k.ExternalPath = resp.GetCheckpointId(), resp.GetExternalPath()
	g, err := s.c.Client.GetCheckpoint(s.e.Ctx, &weirv1.GetCheckpointRequest{JobId: s.job, CheckpointId: k.ID})
	if err != nil {
		return k, err
	}
	if st := g.GetCheckpoint().GetStatus(); st != weirv1.CheckpointStatus_CHECKPOINT_STATUS_COMPLETED {
		return k, fmt.Errorf("checkpoint %d: %s %s", k.ID, st, g.GetCheckpoint().GetFailureMessage())
	}
	k.Bytes, k.StateSize = g.GetCheckpoint().GetCheckpointedSize(), g.GetCheckpoint().GetStateSize()
	for _, st := range g.GetSubtasks() {
		if st.GetVertex() != "state" {
			continue
		}
		k.Sync = max(k.Sync, time.Duration(st.GetMetrics().GetSyncDurationMs())*time.Millisecond)
		k.Async = max(k.Async, time.Duration(st.GetMetrics().GetAsyncDurationMs())*time.Millisecond)
	}
	kind := "incremental"
	if full {
		kind = "full"
	}
	s.e.Logf("%s: %s checkpoint %d: %.0f ms (sync %.0f ms, upload %.0f ms), %.1f of %.1f MB, %.0f MB/s, TaskManager RSS %s → peak %s MiB, disk reads %.1f MB; CPU s: daemons %.2f, server %.2f, other processes %.2f cores",
		s.label(), kind, k.ID, s1Millis(k.Client), s1Millis(k.Sync), s1Millis(k.Async), float64(k.Bytes)/mb, float64(k.StateSize)/mb,
		k.throughput(), fmtMiB(k.RSSBefore), fmtMiB(k.RSSPeak), float64(k.DiskRead)/mb, k.DaemonCPU.Seconds(), k.ExtraCPU.Seconds(), k.Foreign)
	return k, nil
}

func fmtMiB(v []int64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.0f", float64(x)/mib))
	}
	return strings.Join(s, "/")
}

// s3Kind is one side's checkpoints of one kind.
type s3Kind []s3Ckpt

func (ks s3Kind) col(f func(k s3Ckpt) float64) []float64 {
	out := make([]float64, len(ks))
	for i, k := range ks {
		out[i] = f(k)
	}
	return out
}

func (ks s3Kind) peaks() (before, peak []float64) {
	for _, k := range ks {
		for i := range k.RSSPeak {
			before = append(before, float64(k.RSSBefore[i])/mib)
			peak = append(peak, float64(k.RSSPeak[i])/mib)
		}
	}
	return before, peak
}

// s3Floor is one floor run: minio-go PutObject from this process.
type s3Floor struct {
	Bytes              int64
	Elapsed            time.Duration
	ClientCPU, SrvCPU  time.Duration
	Foreign            float64 // CPU cores other processes of the host used meanwhile
	Objects, Multipart int
}

func (f s3Floor) throughput() float64 { return float64(f.Bytes) / mb / f.Elapsed.Seconds() }

// sstSizes lists the SST files checkpoint id uploaded to the job's shared
// directory, grouped by the store (subtask) that uploaded them
// (<store uid>_<checkpoint>_<file>).
func sstSizes(ctx context.Context, cl *minio.Client, job string, id int64) ([][]int64, error) {
	by := map[string][]int64{}
	mid := fmt.Sprintf("_%d_", id)
	for oi := range cl.ListObjects(ctx, s3Bucket, minio.ListObjectsOptions{Prefix: "checkpoints/" + job + "/shared/", Recursive: true}) {
		if oi.Err != nil {
			return nil, oi.Err
		}
		name := oi.Key[strings.LastIndexByte(oi.Key, '/')+1:]
		uid, rest, ok := strings.Cut(name, "_")
		if ok && strings.HasPrefix("_"+rest, mid) {
			by[uid] = append(by[uid], oi.Size)
		}
	}
	var out [][]int64
	for _, uid := range slices.Sorted(func(yield func(string) bool) {
		for k := range by {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, by[uid])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no SST files of checkpoint %d under s3://%s/checkpoints/%s/shared", id, s3Bucket, job)
	}
	return out, nil
}

// s3FloorBufMax bounds the floor's buffer of random data.
const s3FloorBufMax = 2 << 30

// floorBuffer is random data for the floor: as many bytes as the streams
// put (up to s3FloorBufMax), so that, like the SST files a checkpoint
// reads, no object's bytes are still in the CPU's caches from the last.
func floorBuffer(buf []byte, streams [][]int64) []byte {
	var total, largest int64
	for _, sizes := range streams {
		for _, n := range sizes {
			total += n
			largest = max(largest, n)
		}
	}
	need := max(largest, min(total, s3FloorBufMax))
	if int64(len(buf)) < need {
		buf = make([]byte, need)
		_, _ = rand.Read(buf)
	}
	return buf
}

// runFloor puts objects of the given sizes, one goroutine per stream,
// each stream's objects one after the other, then deletes them. Every
// object is a distinct part of buf (cycling through it when it is
// smaller than all the objects together).
func runFloor(e *Env, srv *s3Server, streams [][]int64, buf []byte, prefix string) (s3Floor, error) {
	var f s3Floor
	opts := s3PutOptions()
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	offsets := make([][]int64, len(streams))
	var off int64
	for i, sizes := range streams {
		for _, n := range sizes {
			if off+n > int64(len(buf)) {
				off = 0
			}
			offsets[i] = append(offsets[i], off)
			off += n
			f.Bytes += n
			f.Objects++
			if n > s3PartSize {
				f.Multipart++
			}
		}
	}
	c0, v0 := harness.SelfCPUTime(), mustCPU(srv.proc.Pid())
	in := harness.StartInterference(100 * time.Millisecond)
	start := time.Now()
	for i, sizes := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, n := range sizes {
				key := fmt.Sprintf("%s/%d/%06d.sst", prefix, i, j)
				o := offsets[i][j]
				if _, err := srv.client.PutObject(e.Ctx, s3Bucket, key, bytes.NewReader(buf[o:o+n]), n, opts); err != nil {
					errs[i] = fmt.Errorf("floor put %s: %w", key, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	f.Elapsed = time.Since(start)
	f.Foreign, _ = in.Stop()
	f.ClientCPU, f.SrvCPU = harness.SelfCPUTime()-c0, mustCPU(srv.proc.Pid())-v0
	// Delete what was put, so the disk holds what a job's would.
	objects := make(chan minio.ObjectInfo)
	go func() {
		defer close(objects)
		for oi := range srv.client.ListObjects(e.Ctx, s3Bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
			if oi.Err == nil {
				objects <- minio.ObjectInfo{Key: oi.Key}
			}
		}
	}()
	for re := range srv.client.RemoveObjects(e.Ctx, s3Bucket, objects, minio.RemoveObjectsOptions{}) {
		errs = append(errs, fmt.Errorf("floor delete %s: %w", re.ObjectName, re.Err))
	}
	for _, err := range errs {
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

func mustCPU(pid int) time.Duration {
	t, _ := harness.CPUTime(pid)
	return t
}

// s3Measured is what one side measured.
type s3Measured struct {
	full, incremental s3Kind
	// last is the last checkpoint, which the S3 side restores.
	last s3Ckpt
}

// measure takes the unmeasured first checkpoint, rounds full checkpoints
// (calling after each), then incRounds incremental ones after changed
// keys were rewritten each.
func (s *s3Side) measure(rounds, incRounds int, changed int64, after func(k s3Ckpt) error) (s3Measured, error) {
	var m s3Measured
	if err := s.idle("the first checkpoint"); err != nil {
		return m, err
	}
	k, err := s.checkpoint(false)
	if err != nil {
		return m, fmt.Errorf("%s: first checkpoint: %w", s.name, err)
	}
	m.last = k
	s.e.Logf("%s: first checkpoint (uploads everything, not measured) took %.1f s", s.label(), k.Client.Seconds())
	for i := 0; i < rounds; i++ {
		if err := s.idle("a full checkpoint"); err != nil {
			return m, err
		}
		k, err := s.checkpoint(true)
		if err != nil {
			return m, fmt.Errorf("%s: full checkpoint: %w", s.name, err)
		}
		m.full = append(m.full, k)
		m.last = k
		if after != nil {
			if err := after(k); err != nil {
				return m, err
			}
		}
	}
	for i := 0; i < incRounds; i++ {
		if err := s.update(changed); err != nil {
			return m, err
		}
		if err := s.idle("an incremental checkpoint"); err != nil {
			return m, err
		}
		k, err := s.checkpoint(false)
		if err != nil {
			return m, fmt.Errorf("%s: incremental checkpoint: %w", s.name, err)
		}
		m.incremental = append(m.incremental, k)
		m.last = k
	}
	return m, nil
}

// setEnv sets the environment variables the daemons started next inherit
// and returns what undoes it.
func setEnv(kv ...string) func() {
	type old struct {
		v  string
		ok bool
	}
	prev := map[string]old{}
	for i := 0; i+1 < len(kv); i += 2 {
		v, ok := os.LookupEnv(kv[i])
		prev[kv[i]] = old{v, ok}
		os.Setenv(kv[i], kv[i+1])
	}
	return func() {
		for k, o := range prev {
			if o.ok {
				os.Setenv(k, o.v)
			} else {
				os.Unsetenv(k)
			}
		}
	}
}

func runS3(e *Env, b *Bench) error {
	total := e.StateBytes
	if total <= 0 {
		total = s3DefaultBytes
		if e.Quick {
			total = s3QuickBytes
		}
	}
	keys := total / s3ValueBytes
	changed := max(1, keys/100)
	rounds, incRounds := 5, 3
	if e.Quick {
		rounds, incRounds = 2, 2
	}
	dir := filepath.Join(e.Work, "s3")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The state is big: what the checkpoints and the server wrote goes
	// once measured (the logs stay).
	defer os.RemoveAll(dir)
	srv, err := startVersity(e, dir)
	if err != nil {
		return err
	}
	defer srv.stop(e)
	var gen int64

	// Local disk: load the state, measure, keep the last checkpoint.
	ctrl := filepath.Join(dir, "control-local")
	if err := os.MkdirAll(ctrl, 0o755); err != nil {
		return err
	}
	local, err := runS3Side(e, "local", harness.Config{TaskManagers: 2, Slots: 1}, s3Spec("s3-local", keys, ctrl, ""), ctrl, &gen, nil,
		func(s *s3Side) error {
			e.Logf("S3: loading %d keys × %d B = %d MiB of keyed state", keys, s3ValueBytes, total>>20)
			t := time.Now()
			if err := s.load(keys); err != nil {
				return err
			}
			b.Note("loading %d MiB of keyed state (%d keys × %d B random values) into Pebble through the job took %.1f s", total>>20, keys, s3ValueBytes, time.Since(t).Seconds())
			return nil
		}, rounds, incRounds, changed, nil, nil)
	if err != nil {
		return err
	}
	localCkpts := filepath.Join(e.Work, "s3-local", "checkpoints")
	defer os.RemoveAll(localCkpts)

	// S3: the same state restored from the local disk's last checkpoint.
	ctrl = filepath.Join(dir, "control-s3")
	if err := os.MkdirAll(ctrl, 0o755); err != nil {
		return err
	}
	var floors2, floors1 []s3Floor
	var sizes [][]int64
	var buf []byte
	var job string
	var lastFull s3Ckpt
	floor := func(k s3Ckpt) error {
		lastFull = k
		var err error
		if sizes, err = sstSizes(e.Ctx, srv.client, job, k.ID); err != nil {
			return err
		}
		buf = floorBuffer(buf, sizes)
		var all []int64
		for _, s := range sizes {
			all = append(all, s...)
		}
		for _, streams := range [][][]int64{sizes, {all}} {
			syscall.Sync()
			if _, ok, err := idleProcs(e, []int{srv.proc.Pid()}, time.Minute); err != nil {
				return err
			} else if !ok {
				e.Logf("S3: versitygw still busy before the floor; going on")
			}
			f, err := runFloor(e, srv, streams, buf, fmt.Sprintf("floor-%d-%d", k.ID, len(streams)))
			if err != nil {
				return err
			}
			e.Logf("S3 floor: %d stream(s), %d objects, %.1f MB in %.0f ms: %.0f MB/s; CPU s: client %.2f, server %.2f, other processes %.2f cores",
				len(streams), f.Objects, float64(f.Bytes)/mb, s1Millis(f.Elapsed), f.throughput(), f.ClientCPU.Seconds(), f.SrvCPU.Seconds(), f.Foreign)
			if len(streams) == 1 {
				floors1 = append(floors1, f)
			} else {
				floors2 = append(floors2, f)
			}
		}
		return nil
	}
	restore := setEnv("AWS_ENDPOINT_URL", "http://"+srv.addr, "AWS_REGION", s3Region,
		"AWS_ACCESS_KEY_ID", s3AccessKey, "AWS_SECRET_ACCESS_KEY", s3SecretKey)
	// The S3 side restores the local side's checkpoint, outside its own
	// checkpoint directory: allowed by name.
	cfg := harness.Config{TaskManagers: 2, Slots: 1, ExtraJM: []string{"--checkpoint-dir", "s3://" + s3Bucket + "/checkpoints",
		"--savepoint-dirs", filepath.Dir(local.last.ExternalPath)}}
	onS3, err := runS3Side(e, "S3", cfg, s3Spec("s3-s3", keys, ctrl, local.last.ExternalPath), ctrl, &gen, []int{srv.proc.Pid()},
		func(s *s3Side) error {
			restore()
			job = s.job
			return nil
		}, rounds, incRounds, changed, floor, func(s *s3Side) error {
			if !e.Profile {
				return nil
			}
			return profileS3(e, b, s, srv, sizes, buf, lastFull.Client.Truncate(time.Second)+2*time.Second)
		})
	restore()
	if err != nil {
		return err
	}

	// The table.
	f2 := b.Add("floor: minio-go PutObject, 2 streams (one per subtask, sequential), the checkpoint's SST sizes", "MB/s", true, floorCol(floors2, s3Floor.throughput))
	f1 := b.Add("floor: minio-go PutObject, 1 stream", "MB/s", true, floorCol(floors1, s3Floor.throughput))
	for _, p := range []*Point{f2, f1} {
		fs := floors2
		if p == f1 {
			fs = floors1
		}
		p.With("client CPU s per GB", median(floorCol(fs, func(f s3Floor) float64 { return f.ClientCPU.Seconds() / (float64(f.Bytes) / 1e9) })))
		p.With("versitygw CPU s per GB", median(floorCol(fs, func(f s3Floor) float64 { return f.SrvCPU.Seconds() / (float64(f.Bytes) / 1e9) })))
		p.With("objects", float64(fs[0].Objects))
		p.With("multipart objects (> 16 MiB)", float64(fs[0].Multipart))
		p.With("MB", float64(fs[0].Bytes)/mb)
		p.With("other processes' CPU cores meanwhile (median)", median(floorCol(fs, func(f s3Floor) float64 { return f.Foreign })))
	}
	var all []float64
	for _, s := range sizes {
		for _, n := range s {
			all = append(all, float64(n)/mb)
		}
	}
	f2.With("SST size median MB", median(all))
	f2.With("SST size max MB", slices.Max(all))
	floorMedian := f2.Median

	for _, kind := range []string{"full", "incremental"} {
		for _, side := range []*s3Measured{&local, &onS3} {
			name := "local disk"
			if side == &onS3 {
				name = "S3"
			}
			ks := side.full
			if kind == "incremental" {
				ks = side.incremental
			}
			pfx := fmt.Sprintf("%s, %s checkpoint", name, kind)
			p := b.Add(pfx+": trigger → completed (client)", "ms", false, ks.col(func(k s3Ckpt) float64 { return s1Millis(k.Client) }))
			p.With("sync part (flush + Pebble checkpoint), slowest subtask, ms", median(ks.col(func(k s3Ckpt) float64 { return s1Millis(k.Sync) })))
			b.Add("  upload (async part, slowest subtask)", "ms", false, ks.col(func(k s3Ckpt) float64 { return s1Millis(k.Async) }))
			b.Add("  bytes uploaded", "MB", false, ks.col(func(k s3Ckpt) float64 { return float64(k.Bytes) / mb })).
				With("state size MB", median(ks.col(func(k s3Ckpt) float64 { return float64(k.StateSize) / mb })))
			t := b.Add("  throughput (bytes ÷ upload)", "MB/s", true, ks.col(s3Ckpt.throughput))
			t.With("bytes ÷ trigger → completed, MB/s", median(ks.col(func(k s3Ckpt) float64 { return float64(k.Bytes) / mb / k.Client.Seconds() })))
			t.With("daemon CPU s per GB", median(ks.col(func(k s3Ckpt) float64 { return k.DaemonCPU.Seconds() / (float64(k.Bytes) / 1e9) })))
			t.With("other processes' CPU cores meanwhile (median)", median(ks.col(func(k s3Ckpt) float64 { return k.Foreign })))
			t.With("TaskManagers' disk reads MB (median)", median(ks.col(func(k s3Ckpt) float64 { return float64(k.DiskRead) / mb })))
			if side == &onS3 {
				t.With("versitygw CPU s per GB", median(ks.col(func(k s3Ckpt) float64 { return k.ExtraCPU.Seconds() / (float64(k.Bytes) / 1e9) })))
				for op, n := range ks[len(ks)-1].Requests {
					t.With("storage requests (last): "+op, n)
				}
				if n := ks[len(ks)-1].Requests["put"] + ks[len(ks)-1].Requests["put-part"]; n > 0 {
					t.With("put mean latency ms (last)", 1000*ks[len(ks)-1].PutSeconds/n)
				}
				// The share of the upload the subtasks spent inside put
				// requests (the rest: listing, opening files, between
				// requests).
				t.With("in put requests ÷ upload (both subtasks)", median(ks.col(func(k s3Ckpt) float64 { return k.PutSeconds / (2 * k.Async.Seconds()) })))
				if kind == "full" {
					t.Against("floor 2 streams", floorMedian, "MB/s")
					t.With("÷ floor 1 stream", t.Median/f1.Median)
					t.With("÷ local disk", t.Median/median(local.full.col(s3Ckpt.throughput)))
					t.With("trigger → completed ÷ floor 2 streams", median(ks.col(func(k s3Ckpt) float64 { return float64(k.Bytes) / mb / k.Client.Seconds() }))/floorMedian)
				}
			}
			before, peak := ks.peaks()
			b.Add("  TaskManager peak RSS during it (each TaskManager)", "MiB", false, peak).With("RSS before, MiB (median)", median(before))
		}
	}
	// Each full checkpoint against the floor measured right after it.
	var paired []float64
	for i, k := range onS3.full {
		if i < len(floors2) {
			paired = append(paired, k.throughput()/floors2[i].throughput())
		}
	}
	b.Add("S3 full checkpoint ÷ floor (2 streams), round by round", "×", true, paired)
	var s3t *Point
	for _, p := range b.Points {
		if p.Baseline == "floor 2 streams" {
			s3t = p
		}
	}
	if s3t != nil {
		b.Goal("S3 full-checkpoint upload throughput ÷ floor (minio-go, 2 streams)", s3t.Ratio, ">=", 0.8, "")
	}
	b.Note("%d MiB of keyed Pebble state (incremental backend), job state-load-source (p=2) → hash → random-state (p=2) on 2 TaskManagers × 1 slot: one stateful subtask per TaskManager; checkpoints only on request (TriggerCheckpoint, full or not); %d full, then %d incremental checkpoints each after %d keys (1%%) were rewritten; every checkpoint and floor run taken with the daemons idle, after a sync(2)", total>>20, rounds, incRounds, changed)
	b.Note("local disk: --checkpoint-dir in the work directory; S3: --checkpoint-dir s3://%s/checkpoints on versitygw (posix backend) on loopback, its data in the work directory (same disk); the S3 cluster restored the local cluster's last checkpoint, so both hold the same SST files", s3Bucket)
	b.Note("floor: minio-go PutObject from the harness with Weir's options (part size 16 MiB, 2 part threads, unsigned payload), objects of the sizes of the SSTs the S3 full checkpoint just uploaded, each from its own part of a buffer of random data as large as all of them (up to 2 GiB), as cold in the CPU caches as the files a checkpoint reads; throughput = bytes ÷ wall time; Weir's = checkpointed bytes ÷ the slowest subtask's async part (upload)")
	b.Note("TaskManager peak RSS: VmHWM reset before the checkpoint (/proc/<pid>/clear_refs) and VmRSS sampled every 10 ms")
	return nil
}

func floorCol(fs []s3Floor, f func(s3Floor) float64) []float64 {
	out := make([]float64, len(fs))
	for i, x := range fs {
		out[i] = f(x)
	}
	return out
}

// idleProcs waits until pids use less than 0.05 cores over half a second.
func idleProcs(e *Env, pids []int, limit time.Duration) (time.Duration, bool, error) {
	cpu := func() (t time.Duration) {
		for _, p := range pids {
			t += mustCPU(p)
		}
		return t
	}
	start := time.Now()
	for time.Since(start) < limit {
		c0, t0 := cpu(), time.Now()
		if err := sleep(e, 500*time.Millisecond); err != nil {
			return 0, false, err
		}
		if float64(cpu()-c0)/float64(time.Since(t0)) < 0.05 {
			return time.Since(start), true, nil
		}
	}
	return time.Since(start), false, nil
}

// runS3Side starts a cluster, submits the job, calls ready once it runs
// and measures its checkpoints.
func runS3Side(e *Env, name string, cfg harness.Config, spec, ctrl string, gen *int64, extra []int,
	ready func(s *s3Side) error, rounds, incRounds int, changed int64, after func(k s3Ckpt) error, end func(s *s3Side) error) (s3Measured, error) {
	c, err := e.Cluster("s3-"+strings.ToLower(name), cfg)
	if err != nil {
		return s3Measured{}, err
	}
	defer e.StopCluster(c)
	s := &s3Side{e: e, name: name, c: c, dir: ctrl, gen: gen, extra: extra}
	if s.job, err = c.Submit(e.Ctx, spec); err != nil {
		return s3Measured{}, err
	}
	if err := c.WaitRunning(e.Ctx, s.job, 10*time.Minute); err != nil {
		return s3Measured{}, err
	}
	if err := ready(s); err != nil {
		return s3Measured{}, err
	}
	m, err := s.measure(rounds, incRounds, changed, after)
	if err != nil {
		return m, err
	}
	if end != nil {
		if err := end(s); err != nil {
			return m, err
		}
	}
	if err := c.Cancel(e.Ctx, s.job); err != nil {
		return m, fmt.Errorf("cancel: %w", err)
	}
	return m, nil
}

// profileS3 profiles, unmeasured, the TaskManagers during one more full
// checkpoint to S3, and the harness during one more floor run (2
// streams).
func profileS3(e *Env, b *Bench, s *s3Side, srv *s3Server, streams [][]int64, buf []byte, d time.Duration) error {
	if err := s.idle("the profiled checkpoint"); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		profileTMs(e, b, s.c, "full-checkpoint", d)
	}()
	// Let the profiles start before the checkpoint does.
	if err := sleep(e, 200*time.Millisecond); err != nil {
		return err
	}
	if _, err := s.checkpoint(true); err != nil {
		return err
	}
	<-done
	if _, _, err := idleProcs(e, []int{srv.proc.Pid()}, time.Minute); err != nil {
		return err
	}
	dir := filepath.Join(e.Results, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, "S3-floor-harness.pprof")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	_, err = runFloor(e, srv, streams, buf, "floor-profile")
	pprof.StopCPUProfile()
	if err == nil {
		b.Profiles = append(b.Profiles, path)
	}
	return err
}
