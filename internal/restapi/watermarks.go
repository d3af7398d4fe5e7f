package restapi

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Watermarks: Flink's GET /jobs/{jobid}/vertices/{vertexid}/watermarks,
// and Weir's GET /jobs/{jobid}/watermarks, which answers for every vertex
// the question Flink users ask most about event time: why does my window
// not fire? It follows the lowest watermark upstream, from the vertex to
// the input channel, and from there to the source split, holding it back,
// and lists what is idle on the way. Both come from the event time the
// TaskManagers report with their heartbeats (SubtaskInfo.watermarks).

// metricInfo is one entry of Flink's MetricCollectionResponseBody.
type metricInfo struct {
	ID    string `json:"id"`
	Value string `json:"value"`
}

func (h *Handler) getVertexWatermarks(w http.ResponseWriter, r *http.Request) error {
	job, err := h.job(r)
	if err != nil {
		return err
	}
	v, err := vertexParam(job, r)
	if err != nil {
		return err
	}
	out := []metricInfo{}
	for _, st := range sortedSubtasks(v.info) {
		if wm := st.GetWatermarks(); wm != nil {
			out = append(out, metricInfo{ID: fmt.Sprintf("%d.currentInputWatermark", st.GetIndex()), Value: strconv.FormatInt(wm.GetInputMs(), 10)})
		}
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) getJobWatermarks(w http.ResponseWriter, r *http.Request) error {
	job, err := h.job(r)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, toJobWatermarks(job, h.now()))
	return nil
}

func sortedSubtasks(v *weirv1.VertexInfo) []*weirv1.SubtaskInfo {
	subs := append([]*weirv1.SubtaskInfo(nil), v.GetSubtasks()...)
	sort.Slice(subs, func(i, k int) bool { return subs[i].GetIndex() < subs[k].GetIndex() })
	return subs
}

// jobWatermarks is the answer of GET /jobs/{jobid}/watermarks. Watermarks
// are Unix milliseconds of event time; null: none yet;
// 9223372036854775807: the end of event time (the input ended).
type jobWatermarks struct {
	Vertices []vertexWatermarks `json:"vertices"`
}

type vertexWatermarks struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Watermark is the vertex's: the lowest input watermark of its
	// subtasks that are not idle (Flink's vertex watermark).
	Watermark *int64 `json:"watermark"`
	// LagMs is how far the watermark is behind the wall clock.
	LagMs    *int64               `json:"lag_ms"`
	Idle     bool                 `json:"idle"`
	Subtasks []subtaskWatermarks  `json:"subtasks"`
	HeldBy   []watermarkHolder    `json:"held_back_by"`
	IdleIns  []watermarkChannelID `json:"idle_inputs"`
	// Explanation says in a sentence what holds the vertex's watermark
	// back: why its windows do not fire.
	Explanation string `json:"explanation"`
}

type subtaskWatermarks struct {
	Subtask            int32                `json:"subtask"`
	InputWatermark     *int64               `json:"input_watermark"`
	OutputWatermark    *int64               `json:"output_watermark"`
	Idle               bool                 `json:"idle"`
	Timers             int64                `json:"timers"`
	LateRecordsDropped int64                `json:"late_records_dropped"`
	Channels           []channelWatermarkJS `json:"channels,omitempty"`
	Splits             []splitWatermarkJS   `json:"splits,omitempty"`
}

type channelWatermarkJS struct {
	Vertex    string `json:"vertex"`
	Subtask   int32  `json:"subtask"`
	Watermark *int64 `json:"watermark"`
	Idle      bool   `json:"idle"`
	Finished  bool   `json:"finished"`
	// Holding: this channel's watermark is the subtask's input watermark.
	Holding bool `json:"holding"`
}

type splitWatermarkJS struct {
	ID           string `json:"id"`
	Watermark    *int64 `json:"watermark"`
	MaxTimestamp *int64 `json:"max_timestamp"`
	Idle         bool   `json:"idle"`
	Holding      bool   `json:"holding"`
}

// watermarkHolder is one step of the chain holding a watermark back: a
// subtask, and at a source the split.
type watermarkHolder struct {
	Vertex    string `json:"vertex"`
	Subtask   int32  `json:"subtask"`
	Split     string `json:"split,omitempty"`
	Watermark *int64 `json:"watermark"`
}

type watermarkChannelID struct {
	Vertex  string `json:"vertex"`
	Subtask int32  `json:"subtask"`
	// Split is set for an idle split of a source subtask.
	Split string `json:"split,omitempty"`
}

func wmPtr(ms int64) *int64 {
	if ms == math.MinInt64 {
		return nil
	}
	return &ms
}

// formatWatermark writes a watermark for people.
func formatWatermark(ms int64) string {
	switch ms {
	case math.MinInt64:
		return "none yet"
	case math.MaxInt64:
		return "the end of event time"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func toJobWatermarks(job *jobView, now time.Time) jobWatermarks {
	byName := map[string]*weirv1.VertexInfo{}
	for _, v := range job.vertices {
		byName[v.name] = v.info
	}
	out := jobWatermarks{Vertices: []vertexWatermarks{}}
	for _, v := range job.vertices {
		out.Vertices = append(out.Vertices, toVertexWatermarks(v, byName, now))
	}
	return out
}

func toVertexWatermarks(v vertexView, byName map[string]*weirv1.VertexInfo, now time.Time) vertexWatermarks {
	out := vertexWatermarks{ID: v.id, Name: v.name, Subtasks: []subtaskWatermarks{}, HeldBy: []watermarkHolder{}, IdleIns: []watermarkChannelID{}}
	reported, idle := 0, 0
	var low *weirv1.SubtaskInfo
	for _, st := range sortedSubtasks(v.info) {
		wm := st.GetWatermarks()
		if wm == nil {
			continue
		}
		reported++
		s := subtaskWatermarks{
			Subtask: st.GetIndex(), InputWatermark: wmPtr(wm.GetInputMs()), OutputWatermark: wmPtr(wm.GetOutputMs()),
			Idle: wm.GetIdle(), Timers: wm.GetTimers(), LateRecordsDropped: wm.GetLateRecordsDropped(),
		}
		holding := map[int32]bool{}
		for _, h := range wm.GetHolding() {
			holding[h] = true
		}
		for i, c := range wm.GetChannels() {
			s.Channels = append(s.Channels, channelWatermarkJS{
				Vertex: c.GetUpstreamVertex(), Subtask: c.GetUpstreamSubtask(), Watermark: wmPtr(c.GetWatermarkMs()),
				Idle: c.GetIdle(), Finished: c.GetFinished(), Holding: holding[int32(i)],
			})
			if c.GetIdle() && !c.GetFinished() {
				out.IdleIns = appendChannelID(out.IdleIns, watermarkChannelID{Vertex: c.GetUpstreamVertex(), Subtask: c.GetUpstreamSubtask()})
			}
		}
		hs := holdingSplit(wm)
		for _, sp := range wm.GetSplits() {
			s.Splits = append(s.Splits, splitWatermarkJS{
				ID: sp.GetId(), Watermark: wmPtr(sp.GetWatermarkMs()), MaxTimestamp: wmPtr(sp.GetMaxTimestampMs()),
				Idle: sp.GetIdle(), Holding: sp == hs,
			})
			if sp.GetIdle() {
				out.IdleIns = appendChannelID(out.IdleIns, watermarkChannelID{Vertex: v.name, Subtask: st.GetIndex(), Split: sp.GetId()})
			}
		}
		out.Subtasks = append(out.Subtasks, s)
		if wm.GetIdle() {
			idle++
			continue
		}
		if low == nil || wm.GetInputMs() < low.GetWatermarks().GetInputMs() {
			low = st
		}
	}
	switch {
	case reported == 0:
		out.Explanation = "No subtask reported a watermark yet: the job is starting, or no source upstream has a watermark strategy."
		return out
	case low == nil:
		out.Idle = true
		out.Explanation = fmt.Sprintf("Every subtask is idle: %s. The watermark resumes when one of them receives records.", describeIDs(out.IdleIns))
		return out
	}
	wm := low.GetWatermarks().GetInputMs()
	out.Watermark = wmPtr(wm)
	if wm != math.MinInt64 && wm != math.MaxInt64 {
		lag := now.UnixMilli() - wm
		out.LagMs = &lag
	}
	out.HeldBy = holdingChain(v.name, low, byName)
	// Idle inputs upstream on the way matter too: an idle split of the
	// source holding the watermark back is why it is that source.
	for _, h := range out.HeldBy[1:] {
		for _, st := range byName[h.Vertex].GetSubtasks() {
			if st.GetIndex() != h.Subtask {
				continue
			}
			for _, c := range st.GetWatermarks().GetChannels() {
				if c.GetIdle() && !c.GetFinished() {
					out.IdleIns = appendChannelID(out.IdleIns, watermarkChannelID{Vertex: c.GetUpstreamVertex(), Subtask: c.GetUpstreamSubtask()})
				}
			}
			for _, sp := range st.GetWatermarks().GetSplits() {
				if sp.GetIdle() {
					out.IdleIns = appendChannelID(out.IdleIns, watermarkChannelID{Vertex: h.Vertex, Subtask: h.Subtask, Split: sp.GetId()})
				}
			}
		}
	}
	var b strings.Builder
	switch wm {
	case math.MaxInt64:
		fmt.Fprintf(&b, "The input ended: event time reached its end, and every window fired.")
	default:
		fmt.Fprintf(&b, "Watermark %s", formatWatermark(wm))
		if out.LagMs != nil {
			fmt.Fprintf(&b, " (%s behind the clock)", formatLag(*out.LagMs))
		}
		fmt.Fprintf(&b, ", held back by %s", describeChain(out.HeldBy))
		if last := out.HeldBy[len(out.HeldBy)-1]; last.Watermark == nil {
			b.WriteString(", which has produced no watermark yet (no record, or no watermark strategy)")
		}
		b.WriteString(".")
	}
	if len(out.IdleIns) > 0 {
		fmt.Fprintf(&b, " Idle, not holding it back: %s.", describeIDs(out.IdleIns))
	}
	out.Explanation = b.String()
	return out
}

func appendChannelID(ids []watermarkChannelID, id watermarkChannelID) []watermarkChannelID {
	for _, x := range ids {
		if x == id {
			return ids
		}
	}
	return append(ids, id)
}

// holdingSplit is the active split with the lowest watermark of a source
// subtask, nil if none.
func holdingSplit(wm *weirv1.SubtaskWatermarks) *weirv1.SplitWatermark {
	var low *weirv1.SplitWatermark
	for _, sp := range wm.GetSplits() {
		if !sp.GetIdle() && (low == nil || sp.GetWatermarkMs() < low.GetWatermarkMs()) {
			low = sp
		}
	}
	return low
}

// holdingChain follows the lowest watermark from subtask st of vertex up
// through the channels holding it back to a source (and its split).
func holdingChain(vertex string, st *weirv1.SubtaskInfo, byName map[string]*weirv1.VertexInfo) []watermarkHolder {
	var chain []watermarkHolder
	seen := map[string]bool{}
	for st != nil {
		wm := st.GetWatermarks()
		step := watermarkHolder{Vertex: vertex, Subtask: st.GetIndex(), Watermark: wmPtr(wm.GetInputMs())}
		key := fmt.Sprintf("%s/%d", vertex, st.GetIndex())
		if seen[key] {
			break
		}
		seen[key] = true
		if sp := holdingSplit(wm); sp != nil {
			step.Split = sp.GetId()
		}
		chain = append(chain, step)
		if len(wm.GetHolding()) == 0 {
			break
		}
		idx := wm.GetHolding()[0]
		if int(idx) >= len(wm.GetChannels()) {
			break
		}
		c := wm.GetChannels()[idx]
		vertex, st = c.GetUpstreamVertex(), nil
		for _, up := range byName[vertex].GetSubtasks() {
			if up.GetIndex() == c.GetUpstreamSubtask() && up.GetWatermarks() != nil {
				st = up
			}
		}
		if st == nil {
			chain = append(chain, watermarkHolder{Vertex: vertex, Subtask: c.GetUpstreamSubtask(), Watermark: wmPtr(c.GetWatermarkMs())})
		}
	}
	return chain
}

func describeChain(chain []watermarkHolder) string {
	if len(chain) > 1 {
		chain = chain[1:] // the first step is the vertex itself
	}
	parts := make([]string, len(chain))
	for i, h := range chain {
		parts[i] = fmt.Sprintf("%s subtask %d", h.Vertex, h.Subtask)
		if h.Split != "" {
			parts[i] += fmt.Sprintf(" (split %s)", h.Split)
		}
	}
	return strings.Join(parts, " ← ")
}

func describeIDs(ids []watermarkChannelID) string {
	var parts []string
	for _, id := range ids {
		s := fmt.Sprintf("%s subtask %d", id.Vertex, id.Subtask)
		if id.Split != "" {
			s += fmt.Sprintf(" split %s", id.Split)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// formatLag writes a lag for people: milliseconds to days.
func formatLag(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.Round(time.Millisecond).String()
}
