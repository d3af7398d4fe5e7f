package jobmanager

import (
	"fmt"
	"maps"
	"slices"

	"github.com/weirproject/weir/internal/connector"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// checkClaims refuses a job that claims what a job that has not ended
// holds (internal/connector's claims: an exactly-once Kafka sink's
// transactional-id prefix, say), as the two would break each other.
func (s *Server) checkClaims(g *weirv1.JobGraph) error {
	mine := connector.Claims(g, jobgraph.Connector)
	if len(mine) == 0 {
		return nil
	}
	s.mu.Lock()
	jobs := make([]*jobMaster, 0, len(s.mu.jobs))
	for _, j := range s.mu.jobs {
		jobs = append(jobs, j)
	}
	unrecovered := maps.Clone(s.mu.unrecovered)
	s.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(unrecovered)) {
		for _, other := range connector.Claims(unrecovered[id], jobgraph.Connector) {
			for _, c := range mine {
				if c.Kind == other.Kind && c.Value == other.Value {
					return fmt.Errorf("jobmanager: vertex %q: %s %q is used by stored job %s, which this JobManager could not recover: %s", c.Vertex, c.Kind, c.Value, id, c.Why)
				}
			}
		}
	}
	for _, j := range jobs {
		if scheduler.GloballyTerminal(j.state()) {
			continue
		}
		for _, other := range connector.Claims(j.current().Graph, jobgraph.Connector) {
			for _, c := range mine {
				if c.Kind == other.Kind && c.Value == other.Value {
					return fmt.Errorf("jobmanager: vertex %q: %s %q is used by job %s (%s), which has not ended: %s", c.Vertex, c.Kind, c.Value, j.id, j.name, c.Why)
				}
			}
		}
	}
	return nil
}
