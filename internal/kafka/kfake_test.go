package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// newBroker starts an in-process Kafka-protocol broker (kfake, one node)
// for the package's tests and closes it when the test ends. opts add to
// the defaults, e.g. kfake.SeedTopics(3, "in") to create topics.
func newBroker(t *testing.T, opts ...kfake.Opt) (addr string, c *kfake.Cluster) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0], c
}
