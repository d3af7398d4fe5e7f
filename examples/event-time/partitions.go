package main

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/weirproject/weir/sdk"
)

// Partitions is an unbounded source of numbered partitions, each producing
// records at its own rate, stamped with the time it produced them (as a
// Kafka topic's log-append time would be): key seq mod keys, value 1.
// Partition p is read by subtask p mod parallelism, and each partition is
// a split of the watermark. A partition with rate 0 produces nothing: the
// classic reason a window never fires, which the watermark strategy's
// idle-timeout and the REST API's /jobs/{id}/watermarks are about.
//
//	config: {rates: [100, 100, 0], keys: 8}
type Partitions struct {
	keys  int64
	parts []partition
	pos   sdk.ListState
	outs  []sdk.Collector
	start time.Time
}

type partition struct {
	id        int
	rate      float64
	emitted   int64 // since this attempt started
	seq       int64 // records emitted in all, checkpointed
	splitName string
}

func (s *Partitions) Open(ctx sdk.Context) error {
	cfg := ctx.Config()
	var err error
	if s.keys, err = cfg.Int("keys", 8); err != nil {
		return err
	}
	rates, ok := cfg["rates"].([]any)
	if !ok || len(rates) == 0 {
		return fmt.Errorf("partitions: config \"rates\": want a list of records per second, one per partition")
	}
	// Union state: every subtask sees every partition's position, so a
	// restore at another parallelism finds the partitions it now reads.
	s.pos = ctx.UnionListState("positions")
	restored := map[int]int64{}
	for _, it := range s.pos.Get() {
		if len(it) != 16 {
			return fmt.Errorf("partitions: corrupt position state")
		}
		restored[int(binary.BigEndian.Uint64(it))] = int64(binary.BigEndian.Uint64(it[8:]))
	}
	for p, r := range rates {
		rate, ok := r.(float64)
		if !ok || rate < 0 {
			return fmt.Errorf("partitions: config \"rates\"[%d]: want a non-negative number, got %v", p, r)
		}
		if p%ctx.Parallelism() != ctx.SubtaskIndex() {
			continue
		}
		s.parts = append(s.parts, partition{id: p, rate: rate, seq: restored[p], splitName: fmt.Sprintf("partition-%d", p)})
	}
	return nil
}

func (s *Partitions) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	now := time.Now()
	if s.outs == nil {
		s.start = now
		so, _ := out.(sdk.SourceOutput)
		for _, p := range s.parts {
			if so != nil {
				s.outs = append(s.outs, so.Split(p.splitName))
			} else {
				s.outs = append(s.outs, out)
			}
		}
	}
	wait := time.Second
	for i := range s.parts {
		p := &s.parts[i]
		if p.rate == 0 {
			continue
		}
		due := int64(now.Sub(s.start).Seconds()*p.rate) + 1 - p.emitted
		for ; due > 0; due-- {
			s.outs[i].Collect(sdk.Record{
				Key:       []byte(strconv.FormatInt(p.seq%s.keys, 10)),
				Value:     []byte("1"),
				Timestamp: now.UnixMilli(),
			})
			p.seq++
			p.emitted++
		}
		next := s.start.Add(time.Duration(float64(p.emitted) / p.rate * float64(time.Second)))
		wait = min(wait, max(next.Sub(now), time.Millisecond))
	}
	return sdk.SourceStatus{Backoff: wait}, nil
}

// SnapshotState stores every partition's position.
func (s *Partitions) SnapshotState(int64) error {
	items := make([][]byte, len(s.parts))
	for i, p := range s.parts {
		b := make([]byte, 16)
		binary.BigEndian.PutUint64(b, uint64(p.id))
		binary.BigEndian.PutUint64(b[8:], uint64(p.seq))
		items[i] = b
	}
	s.pos.Update(items)
	return nil
}

func (s *Partitions) Close() error { return nil }
