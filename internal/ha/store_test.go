package ha

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/checkpoint"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func cpN(id int64) checkpoint.Completed {
	return checkpoint.Completed{
		ID:           id,
		MetadataPath: fmt.Sprintf("s3://bucket/job-1/chk-%d/_metadata", id),
		Dir:          fmt.Sprintf("s3://bucket/job-1/chk-%d", id),
	}
}

func ids(cps []checkpoint.Completed) []int64 {
	var out []int64
	for _, cp := range cps {
		out = append(out, cp.ID)
	}
	return out
}

func TestEtcdStoreAddSubsumeRecover(t *testing.T) {
	te := startEtcd(t)
	cfg := testConfig(t, te.client())
	l := elect(t, newElector(t, cfg), "jm-a")
	s, err := NewEtcdStore(cfg, "job-1", 2, l.Fence())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Latest(bg(t)); ok || err != nil {
		t.Fatalf("latest of empty store: %v %v", ok, err)
	}

	var dropped []checkpoint.Completed
	for id := int64(1); id <= 4; id++ {
		sub, err := s.Add(bg(t), cpN(id))
		if err != nil {
			t.Fatal(err)
		}
		dropped = append(dropped, sub...)
	}
	if fmt.Sprint(dropped) != fmt.Sprint([]checkpoint.Completed{cpN(1), cpN(2)}) {
		t.Fatalf("subsumed %v", dropped)
	}
	all, err := s.All(bg(t))
	if err != nil || fmt.Sprint(all) != fmt.Sprint([]checkpoint.Completed{cpN(3), cpN(4)}) {
		t.Fatalf("all %v %v", all, err)
	}
	if latest, ok, err := s.Latest(bg(t)); err != nil || !ok || latest != cpN(4) {
		t.Fatalf("latest %v %v %v", latest, ok, err)
	}
	// One key per retained checkpoint, holding the pointer as JSON.
	resp, err := cfg.Client.Get(bg(t), s.Prefix(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range resp.Kvs {
		got = append(got, string(kv.Key)+" "+string(kv.Value))
	}
	want := []string{
		`/weir/test/checkpoints/job-1/completed/00000000000000000003 {"id":3,"metadata_path":"s3://bucket/job-1/chk-3/_metadata","dir":"s3://bucket/job-1/chk-3"}`,
		`/weir/test/checkpoints/job-1/completed/00000000000000000004 {"id":4,"metadata_path":"s3://bucket/job-1/chk-4/_metadata","dir":"s3://bucket/job-1/chk-4"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("keys:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Out of order is refused; re-adding the newest (a retry) is not.
	if _, err := s.Add(bg(t), cpN(2)); err == nil {
		t.Fatal("added a checkpoint older than the newest")
	}
	if sub, err := s.Add(bg(t), cpN(4)); err != nil || len(sub) != 0 {
		t.Fatalf("re-add 4: %v %v", sub, err)
	}

	// A new leader recovers; the newest checkpoint's metadata is gone.
	reject4 := func(cp checkpoint.Completed) error {
		if cp.ID == 4 {
			return errors.New("_metadata not found")
		}
		return nil
	}
	kept, skipped, err := s.RecoverReport(bg(t), reject4)
	if err != nil || fmt.Sprint(ids(kept)) != "[3]" || len(skipped) != 1 || skipped[0].ID != 4 ||
		!strings.Contains(skipped[0].Err.Error(), "_metadata not found") {
		t.Fatalf("recover: kept %v skipped %v err %v", kept, skipped, err)
	}
	t.Logf("skipped: %s: %v", skipped[0].Key, skipped[0].Err)
	if kept, err := s.Recover(bg(t), reject4); err != nil || fmt.Sprint(ids(kept)) != "[3]" {
		t.Fatalf("recover: %v %v", kept, err)
	}

	// An unreadable newest entry (corrupt value) is skipped too.
	k5 := cfg.mustKeys(t).CompletedCheckpoint("job-1", 5)
	if _, err := cfg.Client.Put(bg(t), k5, "{not json"); err != nil {
		t.Fatal(err)
	}
	kept, skipped, err = s.RecoverReport(bg(t), reject4)
	if err != nil || fmt.Sprint(ids(kept)) != "[3]" || fmt.Sprint(ids(skippedCPs(skipped))) != "[4 5]" {
		t.Fatalf("recover with corrupt 5: kept %v skipped %v err %v", kept, skipped, err)
	}
	if _, _, err := s.Latest(bg(t)); err == nil {
		t.Fatal("latest read a corrupt entry")
	}
	if _, err := s.All(bg(t)); err == nil {
		t.Fatal("all read a corrupt entry")
	}
	// The corrupt and the rejected entries age out like the others.
	sub, err := s.Add(bg(t), cpN(6))
	if err != nil || fmt.Sprint(ids(sub)) != "[3 4]" {
		t.Fatalf("add 6: %v %v", sub, err)
	}
	sub, err = s.Add(bg(t), cpN(7))
	if err != nil || fmt.Sprint(sub) != fmt.Sprint([]checkpoint.Completed{{ID: 5}}) {
		t.Fatalf("add 7: %v %v", sub, err)
	}

	// Suspending keeps the keys for the next leader; discarding removes them.
	if removed, err := s.Shutdown(bg(t), false); err != nil || removed != nil {
		t.Fatalf("shutdown: %v %v", removed, err)
	}
	if all, err := s.All(bg(t)); err != nil || fmt.Sprint(ids(all)) != "[6 7]" {
		t.Fatalf("after suspend: %v %v", all, err)
	}
	removed, err := s.Shutdown(bg(t), true)
	if err != nil || fmt.Sprint(removed) != fmt.Sprint([]checkpoint.Completed{cpN(6), cpN(7)}) {
		t.Fatalf("shutdown discard: %v %v", removed, err)
	}
	if resp, err := cfg.Client.Get(bg(t), s.Prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("keys left after discard: %v %v", resp, err)
	}
}

func skippedCPs(s []SkippedCheckpoint) []checkpoint.Completed {
	var out []checkpoint.Completed
	for _, sk := range s {
		out = append(out, checkpoint.Completed{ID: sk.ID})
	}
	return out
}

func TestEtcdStoreConcurrentAddsReportEachSubsumedOnce(t *testing.T) {
	te := startEtcd(t)
	cfg := testConfig(t, te.client())
	l := elect(t, newElector(t, cfg), "jm-a")
	const n = 20
	// Two store values of one leader race; IDs come in order per writer
	// but interleave, so some adds are refused as out of order.
	s1, _ := NewEtcdStore(cfg, "job-1", 1, l.Fence())
	s2, _ := NewEtcdStore(cfg, "job-1", 1, l.Fence())
	type res struct {
		added, subsumed []int64
	}
	run := func(s *EtcdStore, parity int64, out chan<- res) {
		var r res
		for id := parity; id <= n; id += 2 {
			sub, err := s.Add(bg(t), cpN(id))
			if err != nil {
				continue // older than what the other writer added
			}
			r.added = append(r.added, id)
			r.subsumed = append(r.subsumed, ids(sub)...)
		}
		out <- r
	}
	ch := make(chan res, 2)
	go run(s1, 1, ch)
	go run(s2, 2, ch)
	r1, r2 := <-ch, <-ch
	added := append(r1.added, r2.added...)
	subsumed := append(r1.subsumed, r2.subsumed...)
	all, err := s1.All(bg(t))
	if err != nil || len(all) != 1 {
		t.Fatalf("all %v %v", all, err)
	}
	// Every added checkpoint is either retained or subsumed exactly once.
	seen := map[int64]int{all[0].ID: 1}
	for _, id := range subsumed {
		seen[id]++
	}
	for _, id := range added {
		if seen[id] != 1 {
			t.Fatalf("checkpoint %d accounted %d times (added %v, subsumed %v, retained %v)", id, seen[id], added, subsumed, all)
		}
	}
	if len(seen) != len(added) {
		t.Fatalf("added %v, subsumed %v, retained %v", added, subsumed, all)
	}
}

// The etcd types are drop-in replacements of the standalone ones.
type checkpointStore interface {
	Add(context.Context, checkpoint.Completed) ([]checkpoint.Completed, error)
	Latest(context.Context) (checkpoint.Completed, bool, error)
	All(context.Context) ([]checkpoint.Completed, error)
}

type checkpointCounter interface {
	Next(context.Context) (int64, error)
}

var (
	_ checkpointStore   = (*StandaloneStore)(nil)
	_ checkpointStore   = (*EtcdStore)(nil)
	_ checkpointCounter = (*StandaloneCounter)(nil)
	_ checkpointCounter = (*EtcdCounter)(nil)
)
