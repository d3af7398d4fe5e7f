package suite

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/bench/internal/harness"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// R1 measures the restore of ~1 GiB of keyed Pebble state (incremental
// backend) whose checkpoints are on S3 (versitygw on loopback), after a
// task failure that restarts the job on the same TaskManagers, in two
// configurations in the same run: TaskManagers without --local-recovery
// (every file of the restored checkpoint is downloaded from S3) and with
// it (each TaskManager keeps the newest completed snapshot of its
// subtasks as hard links under its --state-dir and restores from them).
//
// Each configuration is a cluster of its own (2 TaskManagers × 1 slot,
// checkpoints to s3://weir-bench/r1-<config>) running S3's job,
// state-load-source (p=2) → hash → random-state (p=2), with a restart
// strategy (fixed-delay 0 s). The state is loaded, a first checkpoint
// uploads it, then each round rewrites 1% of the keys, takes an
// incremental checkpoint (the one restored), and makes a source subtask
// fail (state-load-source's failure request): the JobManager cancels every
// subtask and deploys them again from that checkpoint, on the same slots
// (the scheduler places subtask i on the i-th TaskManager by ID, which the
// benchmark checks). Measured from the failure (the failing subtask notes
// the time): the job noticed (RESTARTING), the restore chosen by the
// JobManager, every subtask RUNNING again (a subtask reports RUNNING once
// its state is restored), each stateful subtask RUNNING, and the first
// checkpoint after the restore (triggered at once) completed. During the
// restore: what versitygw sent (its write(2) bytes), the TaskManagers'
// storage requests and disk writes, the "restored from the local copy"
// log lines (local_bytes, downloaded_bytes), and the TaskManagers' peak
// RSS (VmHWM reset before the failure, VmRSS sampled every 10 ms). Every
// failure is triggered with the daemons idle, after sync(2).
//
// Baseline of the remote restore: minio-go downloading the same files
// (the restored checkpoint's shared directory, 2 streams of about equal
// bytes, each sequential, into files fsynced as Weir's are), right
// before the failure.
const (
	r1DefaultBytes = 1 << 30
	r1QuickBytes   = 128 << 20
)

func r1Spec(name string, keys int64, dir string) string {
	return fmt.Sprintf(`name: %s
checkpointing: {interval: 0s, mode: exactly-once, timeout: 10m, retained: 1}
restart-strategy: {type: fixed-delay, attempts: 1000, delay: 0s}
state: {backend: pebble, incremental: true}
vertices:
  - {name: source, operator: state-load-source, parallelism: 2, config: {keys: %d, dir: %s}}
  - {name: state, operator: random-state, parallelism: 2, inputs: [{from: source, partition: hash}], config: {value-bytes: %d}}
`, name, keys, strconv.Quote(dir), s3ValueBytes)
}

// r1Restore is one measured failure and restore.
type r1Restore struct {
	RestoredID                  int64
	RestoredBytes               int64 // the state vertex's state size in the restored checkpoint
	Detect, Chosen, Running     time.Duration
	Subtasks                    []time.Duration // each state subtask: failure → RUNNING
	FirstCkpt, FirstCkptClient  time.Duration   // failure → completed; trigger → completed
	FirstCkptBytes              int64
	Served                      int64 // versitygw's write(2) bytes (responses to the TaskManagers)
	Requests                    map[string]float64
	DiskWrite, DiskRead         int64 // the TaskManagers'
	TMCPU                       time.Duration
	RSSBefore, RSSPeak          []int64
	LocalLines                  int // state subtasks restored from the local copy
	LocalBytes, DownloadedBytes int64
	Foreign                     float64
	Floor                       *r1Floor
	FailedSubtask               int
	moved                       []string
}

// r1Floor is minio-go downloading the files a restore downloads.
type r1Floor struct {
	Bytes   int64
	Objects int
	Elapsed time.Duration
	CPU     time.Duration // the harness's
}

func (f r1Floor) throughput() float64 { return float64(f.Bytes) / mb / f.Elapsed.Seconds() }

// procIO reads one field of /proc/<pid>/io.
func procIO(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// rssWatch resets the processes' VmHWM and samples their VmRSS every
// 10 ms until done.
type rssWatch struct {
	pids         []int
	before, peak []int64
	stop         chan struct{}
	wg           sync.WaitGroup
}

func watchRSS(pids []int) *rssWatch {
	w := &rssWatch{pids: pids, stop: make(chan struct{})}
	for _, p := range pids {
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p), []byte("5"), 0)
		r := statusBytes(p, "VmRSS")
		w.before, w.peak = append(w.before, r), append(w.peak, r)
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			for i, p := range w.pids {
				w.peak[i] = max(w.peak[i], statusBytes(p, "VmRSS"))
			}
		}
	}()
	return w
}

func (w *rssWatch) done() (before, peak []int64) {
	close(w.stop)
	w.wg.Wait()
	for i, p := range w.pids {
		w.peak[i] = max(w.peak[i], statusBytes(p, "VmHWM"))
	}
	return w.before, w.peak
}

// stateBenchDir makes the work directory of a benchmark of big state on
// S3 and starts versitygw over it. The state is big: done removes what the
// checkpoints, the state directories and the server wrote once measured
// (the logs stay, in the clusters' own directories, which name must not be).
func stateBenchDir(e *Env, name string) (string, *s3Server, func(), error) {
	dir := filepath.Join(e.Work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, nil, err
	}
	if err := ensureVersity(e); err != nil {
		os.RemoveAll(dir)
		return "", nil, nil, err
	}
	srv, err := startVersity(e, dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, nil, err
	}
	return dir, srv, func() {
		srv.stop(e)
		os.RemoveAll(dir)
	}, nil
}

// ensureVersity builds bin/versitygw from deploy/s3 when it is missing
// (make bench builds it only for BENCH=S3).
func ensureVersity(e *Env) error {
	bin := filepath.Join(filepath.Dir(e.Bin.JobManager), "versitygw")
	if _, err := os.Stat(bin); err == nil {
		return nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "deploy", "s3", "go.mod")); err == nil {
			e.Logf("R1: building %s from %s", bin, filepath.Join(dir, "deploy", "s3"))
			cmd := exec.CommandContext(e.Ctx, "go", "build", "-trimpath", "-o", bin, "github.com/versity/versitygw/cmd/versitygw")
			cmd.Dir = filepath.Join(dir, "deploy", "s3")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("build versitygw: %w\n%s", err, out)
			}
			return nil
		}
		if filepath.Dir(dir) == dir {
			return fmt.Errorf("%s missing and no deploy/s3 above %s to build it from (make bench BENCH=S3 builds it)", bin, wd)
		}
	}
}

func runR1(e *Env, b *Bench) error {
	total := e.StateBytes
	if total <= 0 {
		total = r1DefaultBytes
		if e.Quick {
			total = r1QuickBytes
		}
	}
	keys := total / s3ValueBytes
	changed := max(1, keys/100)
	rounds := 4
	if e.Quick {
		rounds = 2
	}
	dir, srv, done, err := stateBenchDir(e, "r1")
	if err != nil {
		return err
	}
	defer done()

	var remote, local []r1Restore
	for _, cfg := range []struct {
		name  string
		local bool
		out   *[]r1Restore
	}{{"remote", false, &remote}, {"local", true, &local}} {
		rs, err := runR1Side(e, b, srv, dir, cfg.name, cfg.local, keys, changed, rounds)
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.name, err)
		}
		*cfg.out = rs
	}

	// The table.
	col := func(rs []r1Restore, f func(r r1Restore) float64) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = f(r)
		}
		return out
	}
	ms := func(d time.Duration) float64 { return s1Millis(d) }
	var floors []r1Floor
	for _, r := range remote {
		if r.Floor != nil {
			floors = append(floors, *r.Floor)
		}
	}
	fl := b.Add("floor: minio-go GetObject of the restored checkpoint's files, 2 streams (sequential each), to fsynced files", "ms", false,
		floorColR1(floors, func(f r1Floor) float64 { return ms(f.Elapsed) }))
	fl.With("MB/s (median)", median(floorColR1(floors, r1Floor.throughput)))
	fl.With("MB", median(floorColR1(floors, func(f r1Floor) float64 { return float64(f.Bytes) / mb })))
	fl.With("objects", median(floorColR1(floors, func(f r1Floor) float64 { return float64(f.Objects) })))
	fl.With("harness CPU s per GB", median(floorColR1(floors, func(f r1Floor) float64 { return f.CPU.Seconds() / (float64(f.Bytes) / 1e9) })))
	remoteRunning := median(col(remote, func(r r1Restore) float64 { return ms(r.Running) }))
	for _, side := range []struct {
		name string
		rs   []r1Restore
	}{{"remote (no --local-recovery)", remote}, {"local (--local-recovery)", local}} {
		rs := side.rs
		p := b.Add(side.name+": failure → all subtasks running restored", "ms", false, col(rs, func(r r1Restore) float64 { return ms(r.Running) }))
		if side.name[0] == 'r' {
			p.Against("floor: minio-go download of the same files", fl.Median, "ms")
		} else {
			p.Against("remote restore (same run)", remoteRunning, "ms")
			p.With("remote ÷ local", remoteRunning/p.Median)
		}
		p.With("restored state MB (state vertex)", median(col(rs, func(r r1Restore) float64 { return float64(r.RestoredBytes) / mb })))
		p.With("other processes' CPU cores meanwhile (median)", median(col(rs, func(r r1Restore) float64 { return r.Foreign })))
		b.Add("  failure → job restarting (detected)", "ms", false, col(rs, func(r r1Restore) float64 { return ms(r.Detect) }))
		b.Add("  failure → restore chosen (JobManager, old attempts stopped)", "ms", false, col(rs, func(r r1Restore) float64 { return ms(r.Chosen) }))
		var subs []float64
		for _, r := range rs {
			for _, d := range r.Subtasks {
				subs = append(subs, ms(d))
			}
		}
		b.Add("  failure → stateful subtask running restored (each)", "ms", false, subs)
		b.Add("  failure → first checkpoint after the restore completed", "ms", false, col(rs, func(r r1Restore) float64 { return ms(r.FirstCkpt) })).
			With("trigger → completed ms (median)", median(col(rs, func(r r1Restore) float64 { return ms(r.FirstCkptClient) }))).
			With("bytes uploaded MB (median)", median(col(rs, func(r r1Restore) float64 { return float64(r.FirstCkptBytes) / mb })))
		d := b.Add("  bytes downloaded from S3 (versitygw's write(2) bytes)", "MB", false, col(rs, func(r r1Restore) float64 { return float64(r.Served) / mb }))
		for _, op := range []string{"get", "stat", "list"} {
			d.With("TaskManagers' storage requests: "+op+" (median)", median(col(rs, func(r r1Restore) float64 { return r.Requests[op] })))
		}
		d.With("TaskManagers' disk writes MB (median)", median(col(rs, func(r r1Restore) float64 { return float64(r.DiskWrite) / mb })))
		d.With("TaskManagers' disk reads MB (median)", median(col(rs, func(r r1Restore) float64 { return float64(r.DiskRead) / mb })))
		d.With("TaskManagers' CPU s (median)", median(col(rs, func(r r1Restore) float64 { return r.TMCPU.Seconds() })))
		if side.rs[0].LocalLines > 0 || side.name[0] == 'l' {
			d.With("log: local_bytes MB (median)", median(col(rs, func(r r1Restore) float64 { return float64(r.LocalBytes) / mb })))
			d.With("log: downloaded_bytes MB (median)", median(col(rs, func(r r1Restore) float64 { return float64(r.DownloadedBytes) / mb })))
			d.With("log: stateful subtasks restored from the local copy (min of 2)", slices.Min(col(rs, func(r r1Restore) float64 { return float64(r.LocalLines) })))
		}
		var before, peak []float64
		for _, r := range rs {
			for i := range r.RSSPeak {
				before = append(before, float64(r.RSSBefore[i])/mib)
				peak = append(peak, float64(r.RSSPeak[i])/mib)
			}
		}
		b.Add("  TaskManager peak RSS during the restore (each TaskManager)", "MiB", false, peak).With("RSS before the failure, MiB (median)", median(before))
	}
	var paired []float64
	for i := range min(len(remote), len(local)) {
		paired = append(paired, float64(remote[i].Running)/float64(local[i].Running))
	}
	b.Add("remote ÷ local restore time (failure → all running), round by round", "×", true, paired)
	b.Note("%d MiB of keyed Pebble state (incremental backend; %d keys × %d B random values), job state-load-source (p=2) → hash → random-state (p=2) on 2 TaskManagers × 1 slot (one stateful subtask each), restart-strategy fixed-delay 0 s; checkpoints to s3://%s/r1-<config> on versitygw (posix backend) on loopback, its data in the work directory (same disk); each configuration its own cluster, remote first", total>>20, keys, s3ValueBytes, s3Bucket)
	b.Note("%d rounds per configuration: %d keys (1%%) rewritten, an incremental checkpoint (the one restored), then a source subtask fails on request (state-load-source's <dir>/fail); the job restarts every subtask on the same TaskManagers (checked); every failure with the daemons idle, after sync(2); times from the failing subtask's clock reading just before it returns the error; restore progress polled with GetJob every 2 ms", rounds, changed)
	b.Note("a subtask reports RUNNING once its state is restored (downloaded or linked, and Pebble opened); \"restore chosen\" is the JobManager's restore timestamp (ListCheckpoints latest_restored, ms); bytes downloaded are what versitygw wrote to its sockets (/proc/<pid>/io wchar) from the failure until all subtasks ran; TaskManager peak RSS: VmHWM reset before the failure (/proc/<pid>/clear_refs), VmRSS sampled every 10 ms until all subtasks ran")
	b.Note("floor (remote): minio-go GetObject from the harness of every object in the job's shared directory right before the failure (= the checkpoint to be restored), split into 2 streams of about equal bytes (one per stateful subtask), each sequential, io.Copy into a file then fsync, as Weir's download does")
	return nil
}

func floorColR1(fs []r1Floor, f func(r1Floor) float64) []float64 {
	out := make([]float64, len(fs))
	for i, x := range fs {
		out[i] = f(x)
	}
	return out
}

// runR1Side runs one configuration: its cluster, the state, the rounds.
func runR1Side(e *Env, b *Bench, srv *s3Server, dir, name string, local bool, keys, changed int64, rounds int) ([]r1Restore, error) {
	ctrl := filepath.Join(dir, "control-"+name)
	tmp := filepath.Join(dir, "tmp-"+name) // the TaskManagers' --state-dir default is <TMPDIR>/weir-<id>
	for _, d := range []string{ctrl, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	prefix := "r1-" + name
	undo := setEnv("AWS_ENDPOINT_URL", "http://"+srv.addr, "AWS_REGION", s3Region,
		"AWS_ACCESS_KEY_ID", s3AccessKey, "AWS_SECRET_ACCESS_KEY", s3SecretKey,
		"TMPDIR", tmp, "WEIR_LOCAL_RECOVERY", strconv.FormatBool(local))
	c, err := e.Cluster("r1-"+name, harness.Config{TaskManagers: 2, Slots: 1, ExtraJM: []string{"--checkpoint-dir", "s3://" + s3Bucket + "/" + prefix}})
	undo()
	if err != nil {
		return nil, err
	}
	defer e.StopCluster(c)
	var gen int64
	s := &s3Side{e: e, name: name, c: c, dir: ctrl, gen: &gen, extra: []int{srv.proc.Pid()}, bench: "R1"}
	if s.job, err = c.Submit(e.Ctx, r1Spec("r1-"+name, keys, ctrl)); err != nil {
		return nil, err
	}
	if err := c.WaitRunning(e.Ctx, s.job, 10*time.Minute); err != nil {
		return nil, err
	}
	t := time.Now()
	if err := s.load(keys); err != nil {
		return nil, err
	}
	e.Logf("R1 %s: loaded %d keys × %d B in %.1f s", name, keys, s3ValueBytes, time.Since(t).Seconds())
	if err := s.idle("the first checkpoint"); err != nil {
		return nil, err
	}
	k, err := s.checkpoint(false)
	if err != nil {
		return nil, fmt.Errorf("first checkpoint: %w", err)
	}
	e.Logf("R1 %s: first checkpoint (uploads everything) took %.1f s", name, k.Client.Seconds())
	var out []r1Restore
	for round := 1; round <= rounds; round++ {
		if err := s.update(changed); err != nil {
			return nil, err
		}
		if err := s.idle("the checkpoint"); err != nil {
			return nil, err
		}
		if _, err := s.checkpoint(false); err != nil {
			return nil, fmt.Errorf("round %d: checkpoint: %w", round, err)
		}
		var fl *r1Floor
		if !local {
			// After the JobManager deleted what only the subsumed
			// checkpoint referenced.
			if err := s.idle("the floor"); err != nil {
				return nil, err
			}
			f, err := r1DownloadFloor(e, srv, prefix+"/"+s.job+"/shared/", filepath.Join(dir, "floor"))
			if err != nil {
				return nil, fmt.Errorf("round %d: floor: %w", round, err)
			}
			e.Logf("R1 floor: %d objects, %.1f MB downloaded in %.0f ms: %.0f MB/s", f.Objects, float64(f.Bytes)/mb, s1Millis(f.Elapsed), f.throughput())
			fl = &f
		}
		if err := s.idle("the failure"); err != nil {
			return nil, err
		}
		r, err := r1FailAndRestore(s, srv, int64(round))
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		r.Floor = fl
		if len(r.moved) > 0 {
			e.Problem("%s round %d: subtasks restarted on another TaskManager: %s", name, round, strings.Join(r.moved, ", "))
		}
		if local && r.LocalLines < 2 {
			e.Problem("%s round %d: only %d stateful subtasks restored from the local copy", name, round, r.LocalLines)
		}
		if !local && r.LocalLines > 0 {
			e.Problem("%s round %d: %d subtasks restored from a local copy without --local-recovery", name, round, r.LocalLines)
		}
		e.Logf("R1 %s round %d: subtask %d failed; restarting %.0f ms, restore chosen %.0f ms, all running %.0f ms, first checkpoint %.0f ms after the failure; restored checkpoint %d (%.1f MB); versitygw sent %.1f MB, %v requests; log local %.1f MB / downloaded %.1f MB (%d stateful subtasks from the local copy); TaskManager RSS %s → peak %s MiB, disk writes %.1f MB",
			name, round, r.FailedSubtask, s1Millis(r.Detect), s1Millis(r.Chosen), s1Millis(r.Running), s1Millis(r.FirstCkpt), r.RestoredID, float64(r.RestoredBytes)/mb,
			float64(r.Served)/mb, r.Requests, float64(r.LocalBytes)/mb, float64(r.DownloadedBytes)/mb, r.LocalLines, fmtMiB(r.RSSBefore), fmtMiB(r.RSSPeak), float64(r.DiskWrite)/mb)
		out = append(out, r)
	}
	if err := c.Cancel(e.Ctx, s.job); err != nil {
		return out, fmt.Errorf("cancel: %w", err)
	}
	return out, nil
}

var (
	logLocalBytes      = regexp.MustCompile(`"?local_bytes"?[=:]"?(\d+)`)
	logDownloadedBytes = regexp.MustCompile(`"?downloaded_bytes"?[=:]"?(\d+)`)
)

// restoreLogs sums the TaskManagers' restore log lines.
type restoreLogs struct {
	local, downloaded int64 // local_bytes, downloaded_bytes
	stateLocal        int   // lines of the "state" vertex's subtasks restored from the local copy
}

// watchRestoreLogs notes where the TaskManagers' logs end; the function it
// returns reads the restore lines ("restored from the local copy",
// "restored from checkpoint storage") written since.
func watchRestoreLogs(tms []*harness.TM) func() restoreLogs {
	off := make([]int64, len(tms))
	for i, t := range tms {
		if fi, err := os.Stat(t.Log); err == nil {
			off[i] = fi.Size()
		}
	}
	return func() restoreLogs {
		var out restoreLogs
		for i, t := range tms {
			f, err := os.Open(t.Log)
			if err != nil {
				continue
			}
			_, _ = f.Seek(off[i], io.SeekStart)
			b, _ := io.ReadAll(f)
			f.Close()
			for _, line := range strings.Split(string(b), "\n") {
				local := strings.Contains(line, "restored from the local copy")
				if !local && !strings.Contains(line, "restored from checkpoint storage") {
					continue
				}
				if local && (strings.Contains(line, "task=state ") || strings.Contains(line, `"task":"state"`)) {
					out.stateLocal++
				}
				if m := logLocalBytes.FindStringSubmatch(line); m != nil {
					n, _ := strconv.ParseInt(m[1], 10, 64)
					out.local += n
				}
				if m := logDownloadedBytes.FindStringSubmatch(line); m != nil {
					n, _ := strconv.ParseInt(m[1], 10, 64)
					out.downloaded += n
				}
			}
		}
		return out
	}
}

// r1FailAndRestore makes a source subtask fail and measures the restore.
func r1FailAndRestore(s *s3Side, srv *s3Server, gen int64) (r1Restore, error) {
	e, c := s.e, s.c
	var r r1Restore
	j, err := c.Job(e.Ctx, s.job)
	if err != nil {
		return r, err
	}
	if !harness.AllRunning(j, -1) {
		return r, fmt.Errorf("job not running before the failure: %s %s", j.GetState(), j.GetFailureCause())
	}
	type sub struct {
		attempt int32
		tm      string
	}
	old := map[string]sub{}
	for _, v := range j.GetVertices() {
		for _, st := range v.GetSubtasks() {
			old[fmt.Sprintf("%s/%d", v.GetName(), st.GetIndex())] = sub{st.GetAttempt(), st.GetTaskmanagerId()}
		}
	}
	restarts := j.GetRestarts()
	tms := c.LiveTMs()
	var pids []int
	for _, t := range tms {
		pids = append(pids, t.Pid())
	}
	watch := watchRestoreLogs(tms)
	m0, err := c.ScrapeTMs(e.Ctx)
	if err != nil {
		return r, err
	}
	io0 := func() (w, rd int64, cpu time.Duration) {
		for _, p := range pids {
			w += procIO(p, "write_bytes")
			rd += procIO(p, "read_bytes")
			cpu += mustCPU(p)
		}
		return
	}
	w0, rd0, cpu0 := io0()
	served0 := procIO(srv.proc.Pid(), "wchar")
	rss := watchRSS(pids)
	in := harness.StartInterference(100 * time.Millisecond)

	// The failure request.
	failed := filepath.Join(s.dir, fmt.Sprintf("failed-%d", gen))
	tmp := filepath.Join(s.dir, "fail.tmp")
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d\n", gen), 0o644); err != nil {
		rss.done()
		in.Stop()
		return r, err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "fail")); err != nil {
		rss.done()
		in.Stop()
		return r, err
	}
	var tDetect, tRunning time.Time
	subRunning := map[string]time.Time{}
	err = harness.Poll(e.Ctx, 10*time.Minute, 2*time.Millisecond, "the restore", func() (bool, error) {
		j, err := c.Job(e.Ctx, s.job)
		if err != nil {
			return false, err
		}
		switch j.GetState() {
		case weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_FINISHED:
			return false, fmt.Errorf("job %s: %s", j.GetState(), j.GetFailureCause())
		}
		now := time.Now()
		all := j.GetState() == weirv1.JobState_JOB_STATE_RUNNING
		changed := j.GetState() != weirv1.JobState_JOB_STATE_RUNNING || j.GetRestarts() != restarts
		for _, v := range j.GetVertices() {
			for _, st := range v.GetSubtasks() {
				key := fmt.Sprintf("%s/%d", v.GetName(), st.GetIndex())
				was := old[key].attempt
				if st.GetAttempt() != was || st.GetState() != weirv1.ExecutionState_EXECUTION_STATE_RUNNING {
					changed = true
				}
				if st.GetAttempt() <= was || st.GetState() != weirv1.ExecutionState_EXECUTION_STATE_RUNNING {
					all = false
				} else if _, ok := subRunning[key]; !ok {
					subRunning[key] = now
				}
			}
		}
		if changed && tDetect.IsZero() {
			tDetect = now
		}
		if all {
			tRunning = now
			for _, v := range j.GetVertices() {
				for _, st := range v.GetSubtasks() {
					if o := old[fmt.Sprintf("%s/%d", v.GetName(), st.GetIndex())]; o.tm != st.GetTaskmanagerId() {
						r.moved = append(r.moved, fmt.Sprintf("%s/%d %s → %s", v.GetName(), st.GetIndex(), o.tm, st.GetTaskmanagerId()))
					}
				}
			}
			return true, nil
		}
		return false, nil
	})
	r.RSSBefore, r.RSSPeak = rss.done()
	r.Foreign, _ = in.Stop()
	if err != nil {
		return r, err
	}
	served1 := procIO(srv.proc.Pid(), "wchar")
	w1, rd1, cpu1 := io0()
	r.Served, r.DiskWrite, r.DiskRead, r.TMCPU = served1-served0, w1-w0, rd1-rd0, cpu1-cpu0
	m1, err := c.ScrapeTMs(e.Ctx)
	if err != nil {
		return r, err
	}
	r.Requests = map[string]float64{}
	for _, op := range []string{"put", "put-part", "multipart-start", "multipart-complete", "stat", "get", "list", "delete"} {
		if d := m1.Sum("weir_storage_requests_total", map[string]string{"op": op}) - m0.Sum("weir_storage_requests_total", map[string]string{"op": op}); d > 0 {
			r.Requests[op] = d
		}
	}
	// When the subtask failed, by its own clock.
	var tFail time.Time
	if err := harness.Poll(e.Ctx, 10*time.Second, 10*time.Millisecond, "the failure time", func() (bool, error) {
		b, err := os.ReadFile(failed)
		if err != nil {
			return false, nil
		}
		var sub int
		var ns int64
		if _, err := fmt.Sscanf(string(b), "%d %d", &sub, &ns); err != nil {
			return false, fmt.Errorf("%s: %q: %w", failed, b, err)
		}
		r.FailedSubtask, tFail = sub, time.Unix(0, ns)
		return true, nil
	}); err != nil {
		return r, err
	}
	// The first checkpoint after the restore, at once (again while the
	// JobManager is not ready for it yet).
	var resp *weirv1.TriggerCheckpointResponse
	var t0 time.Time
	for try := 0; ; try++ {
		t0 = time.Now()
		ctx, cancel := context.WithTimeout(e.Ctx, 10*time.Minute)
		resp, err = c.Client.TriggerCheckpoint(ctx, &weirv1.TriggerCheckpointRequest{JobId: s.job})
		cancel()
		if err == nil {
			break
		}
		if code := status.Code(err); try >= 200 || (code != codes.Unavailable && code != codes.FailedPrecondition) {
			return r, fmt.Errorf("first checkpoint after the restore: %w", err)
		}
		if err := sleep(e, 10*time.Millisecond); err != nil {
			return r, err
		}
	}
	r.FirstCkptClient, r.FirstCkpt = time.Since(t0), time.Since(tFail)
	if g, err := c.Client.GetCheckpoint(e.Ctx, &weirv1.GetCheckpointRequest{JobId: s.job, CheckpointId: resp.GetCheckpointId()}); err == nil {
		r.FirstCkptBytes = g.GetCheckpoint().GetCheckpointedSize()
	}
	l, err := c.Client.ListCheckpoints(e.Ctx, &weirv1.ListCheckpointsRequest{JobId: s.job})
	if err != nil {
		return r, err
	}
	rest := l.GetLatestRestored()
	r.RestoredID = rest.GetId()
	if g, err := c.Client.GetCheckpoint(e.Ctx, &weirv1.GetCheckpointRequest{JobId: s.job, CheckpointId: r.RestoredID}); err == nil {
		for _, st := range g.GetSubtasks() {
			if st.GetVertex() == "state" {
				r.RestoredBytes += st.GetStateSize()
			}
		}
	}
	r.Detect, r.Running = tDetect.Sub(tFail), tRunning.Sub(tFail)
	r.Chosen = time.UnixMilli(rest.GetRestoreTimestampMs()).Sub(tFail)
	for key, t := range subRunning {
		if strings.HasPrefix(key, "state/") {
			r.Subtasks = append(r.Subtasks, t.Sub(tFail))
		}
	}
	logs := watch()
	r.LocalLines, r.LocalBytes, r.DownloadedBytes = logs.stateLocal, logs.local, logs.downloaded
	return r, nil
}

// r1DownloadFloor downloads every object under prefix with minio-go, two
// streams of about equal bytes, each sequential, into files under
// dir that are fsynced, then removes them and writes back the dirty pages.
func r1DownloadFloor(e *Env, srv *s3Server, prefix, dir string) (r1Floor, error) {
	var f r1Floor
	var objs []minio.ObjectInfo
	for oi := range srv.client.ListObjects(e.Ctx, s3Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if oi.Err != nil {
			return f, oi.Err
		}
		objs = append(objs, oi)
	}
	f.Objects = len(objs)
	if f.Objects == 0 {
		return f, fmt.Errorf("no objects under s3://%s/%s", s3Bucket, prefix)
	}
	// Two streams of about equal bytes, as the two stateful subtasks each
	// download their half (after a restore, a subtask's files carry the
	// names of more than one store, so names do not tell the halves).
	slices.SortFunc(objs, func(a, b minio.ObjectInfo) int { return cmp.Compare(b.Size, a.Size) })
	streams := make([][]string, 2)
	var load [2]int64
	for _, oi := range objs {
		i := 0
		if load[1] < load[0] {
			i = 1
		}
		streams[i] = append(streams[i], oi.Key)
		load[i] += oi.Size
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return f, err
	}
	defer func() {
		os.RemoveAll(dir)
		syscall.Sync()
	}()
	syscall.Sync()
	if _, _, err := idleProcs(e, []int{srv.proc.Pid()}, time.Minute); err != nil {
		return f, err
	}
	errs := make([]error, len(streams))
	sizes := make([]int64, len(streams))
	var gone atomic.Int64
	var wg sync.WaitGroup
	c0 := harness.SelfCPUTime()
	start := time.Now()
	for i, keys := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, key := range keys {
				n, err := r1Get(e.Ctx, srv.client, key, filepath.Join(dir, fmt.Sprintf("%d-%06d", i, j)))
				if minio.ToErrorResponse(err).Code == "NoSuchKey" {
					// Deleted since the listing: a file of the subsumed
					// checkpoint, which the restore does not read.
					gone.Add(1)
					continue
				}
				if err != nil {
					errs[i] = fmt.Errorf("get %s: %w", key, err)
					return
				}
				sizes[i] += n
			}
		}()
	}
	wg.Wait()
	f.Elapsed, f.CPU = time.Since(start), harness.SelfCPUTime()-c0
	f.Objects -= int(gone.Load())
	for i := range streams {
		if errs[i] != nil {
			return f, errs[i]
		}
		f.Bytes += sizes[i]
	}
	return f, nil
}

// r1Get downloads one object into path the way Weir's restore does:
// stream into the file, fsync, close.
func r1Get(ctx context.Context, cl *minio.Client, key, path string) (int64, error) {
	obj, err := cl.GetObject(ctx, s3Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return 0, err
	}
	defer obj.Close()
	out, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, obj)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
