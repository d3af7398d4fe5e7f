package restapi

import (
	"math"
	"strings"
	"testing"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// A job with one idle source split and one slow one: the answer names the
// slow split as what holds the window back, through the channel it feeds,
// and the idle one as not holding it back.
func TestWatermarksExplainWhyNoWindowFires(t *testing.T) {
	const base = int64(1_700_000_000_000)
	source := &weirv1.VertexInfo{Name: "source", Parallelism: 2, Subtasks: []*weirv1.SubtaskInfo{
		{Index: 0, Watermarks: &weirv1.SubtaskWatermarks{InputMs: base + 500, OutputMs: base + 500, Splits: []*weirv1.SplitWatermark{
			{Id: "p0", WatermarkMs: base + 500, MaxTimestampMs: base + 700},
		}}},
		{Index: 1, Watermarks: &weirv1.SubtaskWatermarks{InputMs: base + 100, OutputMs: base + 100, Splits: []*weirv1.SplitWatermark{
			{Id: "p1", WatermarkMs: base + 100, MaxTimestampMs: base + 300},
			{Id: "p2", WatermarkMs: math.MinInt64, MaxTimestampMs: math.MinInt64, Idle: true},
		}}},
	}}
	win := &weirv1.VertexInfo{Name: "window", Parallelism: 1, Subtasks: []*weirv1.SubtaskInfo{
		{Index: 0, Watermarks: &weirv1.SubtaskWatermarks{InputMs: base + 100, OutputMs: base + 100, Timers: 7, Holding: []int32{1}, Channels: []*weirv1.ChannelWatermark{
			{UpstreamVertex: "source", UpstreamSubtask: 0, WatermarkMs: base + 500, Aligned: true},
			{UpstreamVertex: "source", UpstreamSubtask: 1, WatermarkMs: base + 100, Aligned: true},
		}}},
	}}
	job := newJobView(&weirv1.JobInfo{Id: "0123456789abcdef0123456789abcdef", Vertices: []*weirv1.VertexInfo{source, win}})
	got := toJobWatermarks(job, time.UnixMilli(base+1100))
	w := got.Vertices[1]
	if w.Watermark == nil || *w.Watermark != base+100 || w.LagMs == nil || *w.LagMs != 1000 {
		t.Fatalf("window watermark %v lag %v, want %d and 1000", w.Watermark, w.LagMs, base+100)
	}
	if len(w.HeldBy) != 2 || w.HeldBy[1] != (watermarkHolder{Vertex: "source", Subtask: 1, Split: "p1", Watermark: w.HeldBy[1].Watermark}) {
		t.Fatalf("held back by %+v, want window 0 then source 1 split p1", w.HeldBy)
	}
	for _, want := range []string{"held back by source subtask 1 (split p1)", "Idle, not holding it back: source subtask 1 split p2", "1s behind the clock"} {
		if !strings.Contains(w.Explanation, want) {
			t.Errorf("explanation %q lacks %q", w.Explanation, want)
		}
	}
	if !w.Subtasks[0].Channels[1].Holding || w.Subtasks[0].Channels[0].Holding || w.Subtasks[0].Timers != 7 {
		t.Errorf("channels %+v: want the second holding, 7 timers", w.Subtasks[0].Channels)
	}
	s := got.Vertices[0]
	if len(s.HeldBy) != 1 || s.HeldBy[0].Split != "p1" || !strings.Contains(s.Explanation, "source subtask 1 (split p1)") {
		t.Errorf("source: held back by %+v, %q", s.HeldBy, s.Explanation)
	}
}

func TestWatermarksAllIdleAndNone(t *testing.T) {
	idle := &weirv1.VertexInfo{Name: "w", Subtasks: []*weirv1.SubtaskInfo{{Index: 0, Watermarks: &weirv1.SubtaskWatermarks{
		InputMs: 5, Idle: true, Channels: []*weirv1.ChannelWatermark{{UpstreamVertex: "s", Idle: true}},
	}}}}
	none := &weirv1.VertexInfo{Name: "n", Subtasks: []*weirv1.SubtaskInfo{{Index: 0}}}
	got := toJobWatermarks(newJobView(&weirv1.JobInfo{Vertices: []*weirv1.VertexInfo{idle, none}}), time.Now())
	if !got.Vertices[0].Idle || !strings.Contains(got.Vertices[0].Explanation, "Every subtask is idle: s subtask 0") {
		t.Errorf("idle vertex: %+v", got.Vertices[0])
	}
	if got.Vertices[1].Watermark != nil || !strings.Contains(got.Vertices[1].Explanation, "No subtask reported a watermark yet") {
		t.Errorf("vertex without watermarks: %+v", got.Vertices[1])
	}
}
