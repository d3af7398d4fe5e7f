// Package kafkatest reads a topic the way tests check a sink's output: as
// a read_committed consumer downstream sees it, to the topic's end.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadCommitted reads topic read_committed from its start up to its last
// stable offsets as they are when called, through a client made with opts
// (the seed brokers, and a dialer where needed). Records of aborted
// transactions are skipped, and so are the transaction markers.
//
// The end is the last stable offsets, not a few polls that found nothing:
// a fetch the broker holds for its maximum wait would look like the end
// and cut the output short.
func ReadCommitted(ctx context.Context, topic string, opts ...kgo.Opt) ([]*kgo.Record, error) {
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	listed, err := kadm.NewClient(admin).ListCommittedOffsets(ctx, topic)
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("kafkatest: end offsets of %s: %w", topic, err)
	}
	ends := map[int32]int64{}
	for _, o := range listed[topic] {
		if o.Err != nil {
			return nil, fmt.Errorf("kafkatest: end offset of %s-%d: %w", topic, o.Partition, o.Err)
		}
		ends[o.Partition] = o.Offset
	}
	// Markers take offsets too: kept, they move the position to the end.
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...),
		kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	read := map[int32]int64{}
	behind := func() (int32, bool) {
		for p, end := range ends {
			if read[p] < end {
				return p, true
			}
		}
		return 0, false
	}
	var out []*kgo.Record
	for {
		p, ok := behind()
		if !ok {
			return out, nil
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("kafkatest: %s-%d read to offset %d of %d: %w", topic, p, read[p], ends[p], ctx.Err())
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("kafkatest: read %s-%d: %w", e.Topic, e.Partition, e.Err)
			}
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, r := range fp.Records {
				if !r.Attrs.IsControl() {
					out = append(out, r)
				}
				read[fp.Partition] = r.Offset + 1
			}
		})
	}
}
