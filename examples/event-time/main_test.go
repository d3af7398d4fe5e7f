package main

import (
	"testing"

	"github.com/weirproject/weir/internal/jobgraph"
)

func TestJobSpecParses(t *testing.T) {
	if _, err := jobgraph.ParseSpecFile("job.yaml"); err != nil {
		t.Fatal(err)
	}
}
