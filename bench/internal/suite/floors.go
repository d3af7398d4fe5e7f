package suite

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weirproject/weir/bench/internal/floors"
	"github.com/weirproject/weir/bench/internal/harness"
)

// Floors are the medians the benchmarks compare with.
type Floors struct {
	UnaryRTT, StreamRTT, ChanRTT, Fsync, EtcdTxn time.Duration
	// StreamRecords is one-way gRPC stream throughput (records/s) and
	// StreamRecordsPerCore the same per core of CPU time of both ends.
	StreamRecords, StreamRecordsPerCore float64
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func toUS(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = us(d)
	}
	return out
}

func fromUS(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }

// floorBatch is the records per message of the throughput floor: the
// runtime's own batch size (task.Config.BatchSize default).
const floorBatch = 256

func runFloors(e *Env, b *Bench) error {
	f := &Floors{}
	e.Floors = f
	n := 2000
	windows := 5
	if e.Quick {
		n, windows = 500, 3
	}

	// The far end is another process, as every RPC in Weir crosses one.
	addr := harness.FreeAddr()
	srv, err := harness.Start("floor-server", e.Self, harness.LogPath(e.Work, "floor-server"), nil, "serve-floor", "--addr", addr)
	if err != nil {
		return err
	}
	defer func() {
		if err := srv.Stop(5 * time.Second); err != nil {
			e.Logf("floor server: %v", err)
		}
	}()
	c, err := floors.Dial(e.Ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()

	u, err := c.UnaryRTT(e.Ctx, n)
	if err != nil {
		return err
	}
	p := b.Add("gRPC unary round trip", "µs", false, toUS(u))
	f.UnaryRTT = fromUS(p.Median)

	s, err := c.StreamRTT(e.Ctx, n)
	if err != nil {
		return err
	}
	p = b.Add("gRPC stream round trip", "µs", false, toUS(s))
	f.StreamRTT = fromUS(p.Median)

	var recs, perCore, bytesPerRec []float64
	for i := 0; i < windows; i++ {
		var cpu0, self0 time.Duration
		t, err := c.StreamFlood(e.Ctx, floorBatch, 300*time.Millisecond, time.Second, func() {
			cpu0, _ = harness.CPUTime(srv.Pid())
			self0 = harness.SelfCPUTime()
		})
		if err != nil {
			return err
		}
		cpu1, _ := harness.CPUTime(srv.Pid())
		cpu := (cpu1 - cpu0) + (harness.SelfCPUTime() - self0)
		r := float64(t.Records) / t.Elapsed.Seconds()
		recs = append(recs, r)
		perCore = append(perCore, float64(t.Records)/cpu.Seconds())
		bytesPerRec = append(bytesPerRec, float64(t.WireBytes)/float64(t.Records))
	}
	p = b.Add(fmt.Sprintf("gRPC one-way stream, %d×16 B records/message", floorBatch), "rec/s", true, recs)
	f.StreamRecords = p.Median
	pc := b.Add("  same, per core (CPU of sender + receiver)", "rec/s/core", true, perCore)
	f.StreamRecordsPerCore = pc.Median
	p.With("protobuf_bytes_per_record", median(bytesPerRec))

	ch := floors.ChannelRTT(n * 10)
	p = b.Add("Go channel round trip (in-process)", "µs", false, toUS(ch))
	f.ChanRTT = fromUS(p.Median)

	dir := filepath.Join(e.Work, "fsync")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fs, err := floors.Fsync(dir, n/4, 1024)
	if err != nil {
		return err
	}
	p = b.Add("fsync (create, write 1 KiB, fsync, close)", "µs", false, toUS(fs))
	f.Fsync = fromUS(p.Median)

	ep, err := e.Etcd()
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	tx, err := floors.EtcdTxn(e.Ctx, ep, n/4)
	if err != nil {
		return err
	}
	p = b.Add("etcd txn (CAS put, 1 member, own process)", "µs", false, toUS(tx))
	f.EtcdTxn = fromUS(p.Median)
	b.Note("work directory on %s; etcd's WAL is on the same filesystem", e.report.Machine.TmpFS)
	return nil
}

func median(s []float64) float64 {
	if len(s) == 0 {
		return 0
	}
	c := append([]float64(nil), s...)
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j] < c[j-1]; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}
