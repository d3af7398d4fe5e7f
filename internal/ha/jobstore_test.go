package ha

import (
	"fmt"
	"testing"
)

func TestEtcdJobStorePutListDelete(t *testing.T) {
	te := startEtcd(t)
	cfg := testConfig(t, te.client())
	l := elect(t, newElector(t, cfg), "jm-a")
	s, err := NewEtcdJobStore(cfg, l.Fence())
	if err != nil {
		t.Fatal(err)
	}
	list := func() string {
		t.Helper()
		jobs, err := s.List(bg(t))
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, j := range jobs {
			out += fmt.Sprintf("%s=%s", j.ID, j.Graph)
			if j.Status != nil {
				out += fmt.Sprintf("(%s)", j.Status)
			}
			out += " "
		}
		return out
	}
	if got := list(); got != "" {
		t.Fatalf("empty store lists %q", got)
	}
	for _, p := range []struct{ id, g string }{{"b2", "graph-b"}, {"a1", "graph-a"}, {"b2", "graph-b2"}} {
		if err := s.Put(bg(t), p.id, []byte(p.g)); err != nil {
			t.Fatal(err)
		}
	}
	if got := list(); got != "a1=graph-a b2=graph-b2 " {
		t.Fatalf("list %q", got)
	}
	if err := s.PutStatus(bg(t), "a1", []byte("restarts=2")); err != nil {
		t.Fatal(err)
	}
	if got := list(); got != "a1=graph-a(restarts=2) b2=graph-b2 " {
		t.Fatalf("list with a status %q", got)
	}
	if g, ok, err := s.Get(bg(t), "a1"); err != nil || !ok || string(g) != "graph-a" {
		t.Fatalf("get a1: %q %v %v", g, ok, err)
	}
	if err := s.Delete(bg(t), "a1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(bg(t), "a1"); err != nil {
		t.Fatalf("deleting an absent job: %v", err)
	}
	if got := list(); got != "b2=graph-b2 " {
		t.Fatalf("list after delete %q", got)
	}
	// Deleting a job deleted its status too: a job of the same ID starts
	// afresh.
	if err := s.Put(bg(t), "a1", []byte("graph-a2")); err != nil {
		t.Fatal(err)
	}
	if got := list(); got != "a1=graph-a2 b2=graph-b2 " {
		t.Fatalf("list after re-put %q", got)
	}
	if err := s.Delete(bg(t), "a1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Get(bg(t), "a1"); err != nil || ok {
		t.Fatalf("get deleted: %v %v", ok, err)
	}
	if err := s.Put(bg(t), "a/b", nil); err == nil {
		t.Fatal("job ID with '/' accepted")
	}
	// Another cluster's jobs are not listed.
	other := cfg
	other.ClusterID = "test2"
	o, err := NewEtcdJobStore(other, Fence{})
	if err != nil {
		t.Fatal(err)
	}
	if jobs, err := o.List(bg(t)); err != nil || len(jobs) != 0 {
		t.Fatalf("other cluster lists %v %v", jobs, err)
	}
}
