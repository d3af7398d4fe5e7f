package jobmanager

import (
	"fmt"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/kafka/kafkacfg"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// transactionalPrefixes are the transactional-id prefixes of g's
// exactly-once kafka-sinks, by vertex.
func transactionalPrefixes(g *weirv1.JobGraph) map[string]string {
	out := map[string]string{}
	for _, v := range g.GetVertices() {
		if jobgraph.Connector(v) != "kafka-sink" {
			continue
		}
		c, err := kafkacfg.ParseSinkConfig(sdk.Config(v.GetConfig().AsMap()))
		if err == nil && c.Delivery == kafkacfg.ExactlyOnce {
			out[v.GetName()] = c.TransactionalID
		}
	}
	return out
}

// checkTransactionalPrefixes refuses a job whose exactly-once Kafka sink
// would share a transactional-id prefix with a job that has not ended:
// each would fence, and abort, the other's transactions.
func (s *Server) checkTransactionalPrefixes(g *weirv1.JobGraph) error {
	mine := transactionalPrefixes(g)
	if len(mine) == 0 {
		return nil
	}
	s.mu.Lock()
	jobs := make([]*jobMaster, 0, len(s.mu.jobs))
	for _, j := range s.mu.jobs {
		jobs = append(jobs, j)
	}
	s.mu.Unlock()
	for _, j := range jobs {
		if scheduler.GloballyTerminal(j.state()) {
			continue
		}
		for _, other := range transactionalPrefixes(j.current().Graph) {
			for vertex, prefix := range mine {
				if prefix == other {
					return fmt.Errorf("jobmanager: vertex %q: transactional-id-prefix %q is used by job %s (%s), which has not ended: two jobs sharing one abort each other's transactions", vertex, prefix, j.id, j.name)
				}
			}
		}
	}
	return nil
}
