package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/files"
	"github.com/weirproject/weir/program"
)

type Click struct {
	Page string
	User int64
}

func main() {
	job := weir.NewJob("page-views", weir.Checkpointing(time.Second))
	clicks := weir.FromSource(job, "clicks", weir.Generate(0, func(i int64) Click {
		return Click{Page: fmt.Sprintf("/Page/%d", i%10), User: i % 1000}
	}, weir.Rate(1000), weir.EventTime(time.Millisecond, 0)), weir.Watermarks(100*time.Millisecond, 0))
	pages := weir.Map(clicks, "normalize", func(c Click) Click {
		c.Page = strings.ToLower(c.Page)
		return c
	})
	views := weir.Aggregate(weir.Window(weir.KeyBy(pages, func(c Click) string { return c.Page }), weir.Tumbling(10*time.Second)),
		"views", weir.AggregateFuncs[Click, int64, int64]{
			CreateFn: func() int64 { return 0 },
			AddFn:    func(n int64, _ Click) int64 { return n + 1 },
			MergeFn:  func(a, b int64) int64 { return a + b },
			ResultFn: func(n int64) int64 { return n },
		})
	weir.SinkTo(views, "sink", files.Sink("/tmp/page-views", func(w weir.Windowed[string, int64]) string {
		return fmt.Sprintf("%s %d..%d: %d views", w.Key, w.Start, w.End, w.Value)
	}))
	program.Main(job)
}
