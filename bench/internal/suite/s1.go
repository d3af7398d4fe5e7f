package suite

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/state"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

const (
	s1ValueBytes     = 1024
	s1MaxParallelism = 128
	// s1DefaultBytes is the keyed state S1 loads unless -state-bytes says
	// otherwise; -quick takes s1QuickBytes.
	s1DefaultBytes = 1 << 30
	s1QuickBytes   = 64 << 20
)

// onDemand lists the benchmarks a run without -only leaves out: S1 loads
// a GiB of state and takes minutes, as do S3 and R1.
var onDemand = map[string]bool{"S1": true, "S3": true, "R1": true}

// s1Phase is one kind of checkpoint measured over several intervals.
type s1Phase struct {
	name      string
	full      bool
	intervals int
}

// S1: the Pebble state backend's checkpoints, in-process: keyed state of
// StateBytes (1 KiB values), 1% of the keys changing between checkpoints,
// incremental checkpoints against full ones. It measures the backend and
// the storage (a local directory), not RPC or the coordinator: sync is
// TakeSnapshot on the mailbox (memtable flush, hard-linked Pebble
// checkpoint), async is Write (uploading files into checkpoint storage),
// bytes are what the checkpoint uploaded (checkpointed size). The shared
// files no retained checkpoint references are deleted after every
// checkpoint with the JobManager's registry (one retained checkpoint), so
// the disk holds what a real job's would.
func runS1(e *Env, b *Bench) error {
	total := e.StateBytes
	if total <= 0 {
		total = s1DefaultBytes
		if e.Quick {
			total = s1QuickBytes
		}
	}
	// Loading leaves compaction debt behind: the compactions that follow
	// write new SST files the first incremental checkpoints upload. Warm-up
	// intervals (reported in a note) let them settle, so the measured ones
	// show the steady state, where compactions still rewrite some files.
	warmup, incremental, full := 5, 20, 10
	if e.Quick {
		warmup, incremental, full = 2, 5, 5
	}
	keys := int(total / s1ValueBytes)
	changed := max(1, keys/100)
	dir := filepath.Join(e.Work, "s1")
	defer os.RemoveAll(dir)
	shared := filepath.Join(dir, "checkpoints", "shared")
	be, err := state.New(state.Config{
		Kind: weirv1.StateBackendConfig_BACKEND_PEBBLE, Incremental: true, MaxParallelism: s1MaxParallelism,
		KeyGroups: keygroup.RangeFor(s1MaxParallelism, 1, 0),
		LocalDir:  filepath.Join(dir, "local"), SharedDir: shared,
	})
	if err != nil {
		return err
	}
	defer be.Close()

	// Incompressible values: Pebble compresses blocks, and the point is
	// bytes on disk.
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	value := make([]byte, s1ValueBytes)
	key := make([]byte, 8)
	v := be.ValueState("v")
	put := func(k int) {
		binary.BigEndian.PutUint64(key, uint64(k))
		for i := 0; i < len(value); i += 8 {
			binary.LittleEndian.PutUint64(value[i:], rng.Uint64())
		}
		be.SetCurrentKey(key)
		v.Update(value)
	}
	e.Logf("S1: loading %d keys × %d B = %d MiB of keyed state", keys, s1ValueBytes, total>>20)
	loadStart := time.Now()
	for k := 0; k < keys; k++ {
		put(k)
		if k%(1<<16) == 0 && e.Ctx.Err() != nil {
			return e.Ctx.Err()
		}
	}
	b.Note("loading %d MiB took %.1f s", total>>20, time.Since(loadStart).Seconds())

	reg := coordinator.NewSharedRegistry()
	var id, retained int64
	checkpoint := func(full bool) (sync, async time.Duration, st *weirv1.SubtaskState, err error) {
		id++
		chk := filepath.Join(dir, "checkpoints", fmt.Sprintf("chk-%d", id))
		if err := os.MkdirAll(chk, 0o755); err != nil {
			return 0, 0, nil, err
		}
		t0 := time.Now()
		snap, err := be.TakeSnapshot(state.SnapshotOptions{CheckpointID: id, Full: full})
		if err != nil {
			return 0, 0, nil, err
		}
		t1 := time.Now()
		st, err = snap.Write(chk, "state", 0, 1)
		if err != nil {
			return 0, 0, nil, err
		}
		t2 := time.Now()
		// Completion, subsumption of the previous checkpoint, and the
		// deletion of its files that nothing references any more.
		reg.Register(id, st)
		be.NotifyCheckpointComplete(id)
		if retained > 0 {
			for _, p := range reg.Release(retained) {
				os.Remove(p)
			}
			os.RemoveAll(filepath.Join(dir, "checkpoints", fmt.Sprintf("chk-%d", retained)))
		}
		retained = id
		return t1.Sub(t0), t2.Sub(t1), st, nil
	}
	// The first checkpoint uploads everything whatever the kind.
	sync, async, st, err := checkpoint(false)
	if err != nil {
		return err
	}
	b.Note("first checkpoint (uploads all %d MiB of SST files): sync %.0f ms, async %.1f s", st.GetStateSize()>>20,
		s1Millis(sync), async.Seconds())

	for _, ph := range []s1Phase{{"warm-up", false, warmup}, {"incremental", false, incremental}, {"full", true, full}} {
		var syncs, asyncs, bytes, sizes []float64
		for i := 0; i < ph.intervals; i++ {
			if e.Ctx.Err() != nil {
				return e.Ctx.Err()
			}
			for j := 0; j < changed; j++ {
				put(rng.IntN(keys))
			}
			sync, async, st, err := checkpoint(ph.full)
			if err != nil {
				return fmt.Errorf("%s checkpoint %d: %w", ph.name, id, err)
			}
			syncs = append(syncs, s1Millis(sync))
			asyncs = append(asyncs, s1Millis(async))
			bytes = append(bytes, float64(st.GetCheckpointedSize())/(1<<20))
			sizes = append(sizes, float64(st.GetStateSize())/(1<<20))
			e.Logf("S1: %s checkpoint %d: sync %.1f ms, async %.1f ms, uploaded %.1f of %.1f MiB", ph.name, id,
				s1Millis(sync), s1Millis(async), float64(st.GetCheckpointedSize())/(1<<20), float64(st.GetStateSize())/(1<<20))
		}
		if ph.name == "warm-up" {
			b.Note("%d warm-up incremental checkpoints after loading uploaded %s MiB (compaction debt settling)", ph.intervals, fmtList(bytes))
			continue
		}
		b.Add(ph.name+": sync part (flush + Pebble checkpoint)", "ms", false, syncs)
		b.Add(ph.name+": async part (upload)", "ms", false, asyncs)
		b.Add(ph.name+": bytes written per checkpoint", "MiB", false, bytes).With("state size MiB (median)", median(sizes))
	}
	b.Note("%d MiB of keyed state (%d keys × %d B, incompressible), %d keys (1%%) rewritten between checkpoints, %d incremental then %d full checkpoints; in-process, local disk, no RPC",
		total>>20, keys, s1ValueBytes, changed, incremental, full)
	return nil
}

func s1Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fmtList(v []float64) string {
	out := ""
	for i, x := range v {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.0f", x)
	}
	return out
}
