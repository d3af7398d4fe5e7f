package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weirproject/weir/sdk"
)

// The operators of S3 and R1 (bench/internal/suite/s3.go, r1.go), which
// build a GiB of incompressible keyed Pebble state, rewrite a little of it
// on request and (R1) fail a task on request.
func registerStateOps(r *sdk.Registry) {
	r.RegisterSource("state-load-source", func() sdk.Source { return &LoadSource{} })
	r.RegisterOperator("random-state", func() sdk.Operator { return &RandomState{} })
}

// LoadSource emits every key of [0, keys) once (8-byte big-endian keys,
// subtask s of p the keys ≡ s mod p, no value), then idles. Updates are
// asked for through the file <dir>/updates, "<generation> <records>": for
// a generation newer than the last it served, the source emits its share
// of the records (records/p, the remainder to the first subtasks) with
// keys drawn at random from [0, keys). Its position (next key, generation
// served) is operator state, so a job restored from a checkpoint of it
// neither loads again nor repeats an update.
//
// A task failure is asked for through the file <dir>/fail, "<generation>"
// (R1, bench/internal/suite/r1.go): the idle subtask that claims it first
// (renames it away; one rename wins) writes <dir>/failed-<generation>,
// "<subtask> <Unix ns>", and fails with an error, which fails the job over
// as any task failure does. The file is gone, so the restarted subtasks
// do not fail again.
type LoadSource struct {
	keys, next, stride int64
	sub                int
	dir                string
	gen                int64
	pending            int64
	rng                *rand.Rand
	lastPoll           time.Time
	position           sdk.ListState
}

const loadPositionSize = 24 // subtask, next, generation

func (s *LoadSource) Open(ctx sdk.Context) error {
	cfg := ctx.Config()
	var err error
	if s.keys, err = cfg.Int("keys", 0); err != nil {
		return err
	}
	if s.dir, err = cfg.String("dir", ""); err != nil {
		return err
	}
	if s.keys <= 0 || s.dir == "" {
		return fmt.Errorf("state-load-source: need keys > 0 and dir")
	}
	s.sub, s.stride = ctx.SubtaskIndex(), int64(ctx.Parallelism())
	s.next = int64(s.sub)
	s.position = ctx.ListState("position")
	if items := s.position.Get(); len(items) > 0 {
		// Restored: resume this subtask's item; another parallelism (not
		// used by the benchmark) only keeps the generation served.
		s.next = s.keys
		for _, it := range items {
			if len(it) != loadPositionSize {
				return fmt.Errorf("state-load-source: corrupt position (%d bytes)", len(it))
			}
			s.gen = max(s.gen, int64(binary.BigEndian.Uint64(it[16:])))
			if int(binary.BigEndian.Uint64(it)) == s.sub && int64(len(items)) == s.stride {
				s.next = int64(binary.BigEndian.Uint64(it[8:]))
			}
		}
	}
	return nil
}

func (s *LoadSource) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	n := 0
	for ; s.next < s.keys && n < 512; n++ {
		out.Collect(sdk.Record{Key: binary.BigEndian.AppendUint64(nil, uint64(s.next))})
		s.next += s.stride
	}
	if n > 0 {
		return sdk.SourceStatus{}, nil
	}
	if s.pending == 0 && time.Since(s.lastPoll) >= 20*time.Millisecond {
		s.lastPoll = time.Now()
		if err := s.failOnRequest(); err != nil {
			return sdk.SourceStatus{}, err
		}
		s.poll()
	}
	for ; s.pending > 0 && n < 512; n++ {
		out.Collect(sdk.Record{Key: binary.BigEndian.AppendUint64(nil, uint64(s.rng.Int64N(s.keys)))})
		s.pending--
	}
	if n > 0 {
		return sdk.SourceStatus{}, nil
	}
	return sdk.SourceStatus{Backoff: 20 * time.Millisecond}, nil
}

// poll reads the update request, if there is a new one.
func (s *LoadSource) poll() {
	b, err := os.ReadFile(filepath.Join(s.dir, "updates"))
	if err != nil {
		return
	}
	var gen, records int64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d %d", &gen, &records); err != nil || gen <= s.gen {
		return
	}
	s.gen = gen
	s.pending = records / s.stride
	if int64(s.sub) < records%s.stride {
		s.pending++
	}
	s.rng = rand.New(rand.NewPCG(uint64(gen), uint64(s.sub)))
}

// failOnRequest returns an error when this subtask claimed a failure
// request (see LoadSource).
func (s *LoadSource) failOnRequest() error {
	claimed := filepath.Join(s.dir, fmt.Sprintf("fail.claimed-%d", s.sub))
	if err := os.Rename(filepath.Join(s.dir, "fail"), claimed); err != nil {
		return nil // none, or another subtask claimed it
	}
	b, err := os.ReadFile(claimed)
	if err != nil {
		return fmt.Errorf("state-load-source: failure request: %w", err)
	}
	gen := strings.TrimSpace(string(b))
	os.Remove(claimed)
	at := time.Now()
	tmp := filepath.Join(s.dir, "failed.tmp-"+gen)
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %d\n", s.sub, at.UnixNano()), 0o644); err == nil {
		_ = os.Rename(tmp, filepath.Join(s.dir, "failed-"+gen))
	}
	return fmt.Errorf("state-load-source: failing on request (generation %s, subtask %d)", gen, s.sub)
}

func (s *LoadSource) SnapshotState(int64) error {
	it := make([]byte, loadPositionSize)
	binary.BigEndian.PutUint64(it, uint64(s.sub))
	binary.BigEndian.PutUint64(it[8:], uint64(s.next))
	binary.BigEndian.PutUint64(it[16:], uint64(s.gen))
	s.position.Update([][]byte{it})
	return nil
}

func (s *LoadSource) Close() error { return nil }

// RandomState sets the keyed value of every record's key to "value-bytes"
// (default 1024) fresh random bytes: incompressible state, so the bytes
// on disk and in checkpoints are the bytes of the state.
type RandomState struct {
	v   sdk.ValueState
	rng *rand.ChaCha8
	n   int
}

func (r *RandomState) Open(ctx sdk.Context) error {
	n, err := ctx.Config().Int("value-bytes", 1024)
	if err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("random-state: value-bytes must be > 0")
	}
	r.n = int(n)
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(time.Now().UnixNano()))
	binary.LittleEndian.PutUint64(seed[8:], uint64(ctx.SubtaskIndex()))
	r.rng = rand.NewChaCha8(seed)
	r.v = ctx.ValueState("v")
	return nil
}

func (r *RandomState) ProcessRecord(sdk.Record, sdk.Collector) error {
	v := make([]byte, r.n)
	_, _ = r.rng.Read(v)
	r.v.Update(v)
	return nil
}

func (r *RandomState) Close() error { return nil }
