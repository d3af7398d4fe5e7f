package state

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// BenchmarkRescaleRestore restores one Pebble subtask from the incremental
// snapshots of two (a scale-in: the snapshot with most of its key groups
// opened in place, the other's key groups ingested) and of one
// (a scale-out: the snapshot opened in place and clipped), each snapshot
// 32 MiB of 1 KiB values, from local copies as after a rescale on the same
// TaskManager. Bytes per op are those the restore takes over.
func BenchmarkRescaleRestore(b *testing.B) {
	const maxP, perState = 128, 32 << 20
	root := b.TempDir()
	shared, stateDir := filepath.Join(root, "shared"), filepath.Join(root, "sd")
	open := func(p, i int, restored int64) *Pebble {
		be, err := New(Config{
			Kind: weirv1.StateBackendConfig_BACKEND_PEBBLE, Incremental: true, MaxParallelism: maxP,
			KeyGroups: keygroup.RangeFor(maxP, p, i), LocalDir: b.TempDir(), SharedDir: shared,
			LocalRecoveryDir: LocalRecoveryDir(stateDir, "job", "op", i), RestoredCheckpointID: restored,
		})
		if err != nil {
			b.Fatal(err)
		}
		return be.(*Pebble)
	}
	dir := filepath.Join(root, "chk-1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 1024)
	var prev []*weirv1.SubtaskState
	for i := range 2 {
		be := open(2, i, 0)
		v := be.ValueState("v")
		for k, n := 0, 0; n < perState/len(val); k++ {
			key := fmt.Appendf(nil, "key-%09d", k)
			if keygroup.OperatorIndex(keygroup.Of(key, maxP), maxP, 2) != i {
				continue
			}
			for j := range val {
				val[j] = byte(rng.Uint32())
			}
			be.SetCurrentKey(key)
			v.Update(val)
			n++
		}
		s, err := be.TakeSnapshot(SnapshotOptions{CheckpointID: 1})
		if err != nil {
			b.Fatal(err)
		}
		st, err := s.Write(dir, "op", i, 2)
		if err != nil {
			b.Fatal(err)
		}
		be.NotifyCheckpointComplete(1)
		prev = append(prev, st)
		if err := be.Close(); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name      string
		p, moved  int
		subtask   int
		prevState []*weirv1.SubtaskState
	}{
		{"scale-in-2-to-1", 1, perState, 0, prev},
		{"scale-out-2-to-4", 4, 0, 1, prev},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(max(c.moved, 1)))
			for b.Loop() {
				be := open(c.p, c.subtask, 1)
				if err := be.Restore(c.prevState, c.subtask, c.p); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := be.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
