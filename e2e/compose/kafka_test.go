package compose

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/kafka/kafkatest"
	"github.com/weirproject/weir/internal/window"
	"github.com/weirproject/weir/sdk"
)

// The Kafka job (deploy/kafka-windows.yaml) reads `events`, which the test
// fills from outside the cluster like any producing application: kafkaCount
// records at kafkaRate per second, so the kills of the running-sum job hit
// it too.
const (
	kafkaCount, kafkaKeys, kafkaRate = 60000, 8, 1000
	kafkaPartitions                  = 4 // the compose broker's --partitions
	// kafkaBase puts the event times in the present era.
	kafkaBase = int64(1_700_000_000_000)
	// kafkaJitter: record i is up to this many ms older than record i-1
	// of its partition at most, well inside the job's 1 s out-of-orderness.
	kafkaJitter = 40
)

// kafkaRecords are the events: check.SequenceRecords's keys, values and
// event times (1 ms apart, up to kafkaJitter ms out of order), shifted to
// kafkaBase.
func kafkaRecords() []check.Record {
	recs := check.SequenceRecords(kafkaCount, kafkaKeys, 1, kafkaJitter)
	for i := range recs {
		recs[i].Timestamp += kafkaBase
	}
	return recs
}

// kafkaOpts talk to the compose broker from the host: the broker
// advertises kafka:9092, which only resolves inside the compose network,
// so every connection goes to the port compose published instead.
func kafkaOpts(published string, opts ...kgo.Opt) []kgo.Opt {
	var d net.Dialer
	return append([]kgo.Opt{
		kgo.SeedBrokers(published),
		kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, published)
		}),
	}, opts...)
}

// produceEvents writes the events at kafkaRate, key k to partition
// k mod kafkaPartitions, then one record per partition far in the future,
// whose watermark closes every window of the events. It returns once
// everything is acknowledged.
func produceEvents(ctx context.Context, published string) error {
	cl, err := kgo.NewClient(kafkaOpts(published, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := kafkaRecords()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			firstErr = err
			mu.Unlock()
		}
		wg.Done()
	}
	const perTick = kafkaRate / 10
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i, r := range recs {
		if i > 0 && i%perTick == 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		key, err := strconv.Atoi(r.Key)
		if err != nil {
			return err
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{
			Topic: "events", Partition: int32(key % kafkaPartitions), Key: []byte(r.Key),
			Value: strconv.AppendInt(nil, r.Value, 10), Timestamp: time.UnixMilli(r.Timestamp),
		}, done)
	}
	end := kafkaBase + kafkaCount + time.Hour.Milliseconds()
	for p := range int32(kafkaPartitions) {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: "events", Partition: p, Key: []byte("end"), Value: []byte("0"), Timestamp: time.UnixMilli(end)}, done)
	}
	wg.Wait()
	return firstErr
}

// kafkaWindows reads the `windows` topic read_committed to its end, as
// check.Windows lines (key,start,end,sum).
func kafkaWindows(ctx context.Context, published string) ([]string, error) {
	recs, err := kafkatest.ReadCommitted(ctx, "windows", kafkaOpts(published)...)
	if err != nil {
		return nil, fmt.Errorf("read windows: %w", err)
	}
	lines := make([]string, len(recs))
	for i, r := range recs {
		lines[i] = string(r.Key) + "," + string(r.Value)
	}
	return lines, nil
}

// kafkaWant is what the windows topic must hold exactly once: the
// windows of the job's window vertex over the events, computed at once.
func kafkaWant(root string) (map[string]string, error) {
	g, err := jobgraph.ParseSpecFile(filepath.Join(root, "deploy", "kafka-windows.yaml"))
	if err != nil {
		return nil, err
	}
	for _, v := range g.GetVertices() {
		if v.GetOperator() == "window" {
			spec, err := window.Parse(sdk.Config(v.GetConfig().AsMap()))
			if err != nil {
				return nil, err
			}
			return check.BatchWindows(spec, kafkaRecords()), nil
		}
	}
	return nil, fmt.Errorf("deploy/kafka-windows.yaml has no window vertex")
}

// kafkaJobSpec is deploy/kafka-windows.yaml, as users submit it.
func kafkaJobSpec(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "deploy", "kafka-windows.yaml"))
	return string(b), err
}
