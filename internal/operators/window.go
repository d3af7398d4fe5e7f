package operators

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/weirproject/weir/internal/window"
	"github.com/weirproject/weir/sdk"
)

// Window is the built-in keyed window operator: tumbling, sliding or
// session windows over event or processing time, aggregating the records'
// decimal values with count, sum, min, max or avg. A window fires once when
// the watermark (or the clock) passes its end and emits one record: the
// input key, and the value "<start-ms>,<end-ms>,<result>", timestamped at
// the window's last millisecond.
//
// Its state is bounded by what is open: tumbling and sliding windows keep
// one accumulator per key and pane (see package window), session windows
// one per key and session, and both are removed when the windows they feed
// are past their end plus the allowed lateness. A record later than that
// goes to the "late" side output, or is counted as dropped. A late record
// within the allowed lateness updates the windows it belongs to, which
// fire again at once with the new result (Flink's late firing).
type Window struct {
	spec   window.Spec
	ctx    sdk.Context
	timers sdk.TimerService
	// panes (tumbling, sliding) and sessions are keyed map state keyed by
	// window.TimeKey of the pane or session start.
	panes, sessions sdk.MapState
	buf             []byte
}

// cleanupNS is the namespace of a window's clean-up timer; its firing
// timer has none.
var cleanupNS = []byte("c")

func (w *Window) Open(ctx sdk.Context) error {
	spec, err := window.Parse(ctx.Config())
	if err != nil {
		return fmt.Errorf("window: %w", err)
	}
	w.spec, w.ctx, w.timers = spec, ctx, ctx.TimerService()
	if spec.Kind == window.Session {
		w.sessions = ctx.MapState("sessions")
	} else {
		w.panes = ctx.MapState("panes")
	}
	return nil
}

func (w *Window) Close() error { return nil }

func (w *Window) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	var v int64
	if w.spec.Aggregate != window.Count {
		var err error
		if v, err = parseInt(r.Value); err != nil {
			return fmt.Errorf("window: value of key %q: %w", r.Key, err)
		}
	}
	ts := r.Timestamp
	if w.spec.ProcessingTime {
		ts = w.timers.CurrentProcessingTime()
	}
	if w.spec.Kind == window.Session {
		return w.addToSession(r, ts, v, out)
	}
	return w.addToPane(r, ts, v, out)
}

// watermark is the time windows are judged by: the input watermark, or
// nothing is ever late on processing time.
func (w *Window) watermark() int64 {
	if w.spec.ProcessingTime {
		return sdk.MinWatermark
	}
	return w.timers.CurrentWatermark()
}

// cleaned reports whether a window ending at end is past its end plus the
// allowed lateness: its state is gone (or going), and nothing updates it.
func (w *Window) cleaned(end, wm int64) bool {
	// wm − lateness, not end + lateness: end is a record's time, anything,
	// while wm is MinWatermark (where the subtraction would wrap) only
	// before the first watermark, when nothing is late.
	return wm != sdk.MinWatermark && window.MaxTimestamp(end) <= wm-w.spec.Lateness
}

func (w *Window) register(ns []byte, ts int64) {
	if w.spec.ProcessingTime {
		w.timers.RegisterProcessingTimeTimer(ns, ts)
	} else {
		w.timers.RegisterEventTimeTimer(ns, ts)
	}
}

func (w *Window) deleteTimer(ns []byte, ts int64) {
	if w.spec.ProcessingTime {
		w.timers.DeleteProcessingTimeTimer(ns, ts)
	} else {
		w.timers.DeleteEventTimeTimer(ns, ts)
	}
}

func (w *Window) addToPane(r sdk.Record, ts, v int64, out sdk.Collector) error {
	s, wm := w.spec, w.watermark()
	p := s.PaneStart(ts)
	if w.cleaned(s.LastEnd(p), wm) {
		w.ctx.EmitLate(r)
		return nil
	}
	w.buf = window.TimeKey(w.buf[:0], p)
	var acc window.Acc
	if b, ok := w.panes.Get(w.buf); ok {
		if err := acc.UnmarshalBinary(b); err != nil {
			return fmt.Errorf("window: state of key %q: %w", r.Key, err)
		}
	}
	acc.Add(v)
	enc, _ := acc.AppendBinary(w.buf[8:8])
	w.panes.Put(w.buf[:8], enc)
	// The windows holding the pane that the watermark passed but that are
	// not cleaned yet fire again with the late record; the first one ahead
	// of the watermark gets a timer (which fires the later ones in turn).
	for end := s.FirstEnd(p); end <= s.LastEnd(p); end += s.Slide {
		switch {
		case w.cleaned(end, wm):
		case window.MaxTimestamp(end) <= wm:
			if err := w.firePanes(r.Key, end, out); err != nil {
				return err
			}
		default:
			w.register(nil, window.MaxTimestamp(end))
			return nil
		}
	}
	return nil
}

func (w *Window) OnTimer(t sdk.Timer, out sdk.Collector) error {
	if w.spec.Kind == window.Session {
		return w.onSessionTimer(t, out)
	}
	if bytes.Equal(t.Namespace, cleanupNS) {
		return w.dropPanes(t.Timestamp - w.spec.Lateness + 1)
	}
	end := t.Timestamp + 1
	if err := w.firePanes(t.Key, end, out); err != nil {
		return err
	}
	if w.spec.Lateness > 0 {
		w.register(cleanupNS, t.Timestamp+w.spec.Lateness)
	} else if err := w.dropPanes(end); err != nil {
		return err
	}
	// The next window with data: the first pane that a window ending after
	// this one still holds.
	for k := range w.panes.All() {
		p, err := window.ParseTimeKey(k)
		if err != nil {
			return fmt.Errorf("window: state of key %q: %w", t.Key, err)
		}
		if w.spec.LastEnd(p) > end {
			w.register(nil, window.MaxTimestamp(max(end+w.spec.Slide, w.spec.FirstEnd(p))))
			break
		}
	}
	return nil
}

// firePanes emits the result of key's window ending at end, merged from
// its panes.
func (w *Window) firePanes(key []byte, end int64, out sdk.Collector) error {
	start := end - w.spec.Size
	var acc window.Acc
	for k, b := range w.panes.All() {
		p, err := window.ParseTimeKey(k)
		if err != nil {
			return fmt.Errorf("window: state of key %q: %w", key, err)
		}
		if p >= end {
			break
		}
		if p < start {
			continue
		}
		var pa window.Acc
		if err := pa.UnmarshalBinary(b); err != nil {
			return fmt.Errorf("window: state of key %q: %w", key, err)
		}
		acc.Merge(pa)
	}
	if acc.Count > 0 {
		w.emit(key, start, end, acc, out)
	}
	return nil
}

// dropPanes removes the panes no window ending after end holds.
func (w *Window) dropPanes(end int64) error {
	var drop [][]byte
	for k := range w.panes.All() {
		p, err := window.ParseTimeKey(k)
		if err != nil {
			return err
		}
		if w.spec.LastEnd(p) > end {
			break
		}
		drop = append(drop, k)
	}
	for _, k := range drop {
		w.panes.Remove(k)
	}
	return nil
}

// session is one session window of a key as kept in state.
type session struct {
	start, end int64
	acc        window.Acc
}

func (w *Window) readSessions(key []byte) ([]session, error) {
	var ss []session
	for k, b := range w.sessions.All() {
		start, err := window.ParseTimeKey(k)
		if err != nil {
			return nil, fmt.Errorf("window: state of key %q: %w", key, err)
		}
		end, n := binary.Varint(b)
		if n <= 0 {
			return nil, fmt.Errorf("window: state of key %q: corrupt session", key)
		}
		s := session{start: start, end: end}
		if err := s.acc.UnmarshalBinary(b[n:]); err != nil {
			return nil, fmt.Errorf("window: state of key %q: %w", key, err)
		}
		ss = append(ss, s)
	}
	return ss, nil
}

func (w *Window) putSession(s session) {
	w.buf = window.TimeKey(w.buf[:0], s.start)
	v := binary.AppendVarint(w.buf[8:8], s.end)
	v, _ = s.acc.AppendBinary(v)
	w.sessions.Put(w.buf[:8], v)
}

func (w *Window) removeSession(s session) {
	w.buf = window.TimeKey(w.buf[:0], s.start)
	w.sessions.Remove(w.buf)
	w.deleteTimer(nil, window.MaxTimestamp(s.end))
	w.deleteTimer(cleanupNS, window.MaxTimestamp(s.end)+w.spec.Lateness)
}

// addToSession merges the record's window [ts, ts+gap) with every session
// of its key it touches (Flink's merging windows).
func (w *Window) addToSession(r sdk.Record, ts, v int64, out sdk.Collector) error {
	wm := w.watermark()
	ss, err := w.readSessions(r.Key)
	if err != nil {
		return err
	}
	merged := session{start: ts, end: ts + w.spec.Gap}
	merged.acc.Add(v)
	var absorbed []session
	for _, s := range ss {
		if s.start <= merged.end && s.end >= merged.start {
			merged.start, merged.end = min(merged.start, s.start), max(merged.end, s.end)
			merged.acc.Merge(s.acc)
			absorbed = append(absorbed, s)
		}
	}
	if w.cleaned(merged.end, wm) {
		w.ctx.EmitLate(r)
		return nil
	}
	for _, s := range absorbed {
		w.removeSession(s)
	}
	w.putSession(merged)
	if window.MaxTimestamp(merged.end) > wm {
		w.register(nil, window.MaxTimestamp(merged.end))
		return nil
	}
	// Late but within the allowed lateness: the session fires again now.
	w.emit(r.Key, merged.start, merged.end, merged.acc, out)
	w.register(cleanupNS, window.MaxTimestamp(merged.end)+w.spec.Lateness)
	return nil
}

func (w *Window) onSessionTimer(t sdk.Timer, out sdk.Collector) error {
	cleanup := bytes.Equal(t.Namespace, cleanupNS)
	end := t.Timestamp + 1
	if cleanup {
		end -= w.spec.Lateness
	}
	ss, err := w.readSessions(t.Key)
	if err != nil {
		return err
	}
	for _, s := range ss {
		if s.end != end {
			continue
		}
		if !cleanup {
			w.emit(t.Key, s.start, s.end, s.acc, out)
			if w.spec.Lateness > 0 {
				w.register(cleanupNS, t.Timestamp+w.spec.Lateness)
				return nil
			}
		}
		w.buf = window.TimeKey(w.buf[:0], s.start)
		w.sessions.Remove(w.buf)
		return nil
	}
	return nil
}

// emit sends one window's result downstream.
func (w *Window) emit(key []byte, start, end int64, acc window.Acc, out sdk.Collector) {
	v := make([]byte, 0, 48)
	v = strconv.AppendInt(v, start, 10)
	v = append(v, ',')
	v = strconv.AppendInt(v, end, 10)
	v = append(v, ',')
	v = acc.AppendResult(v, w.spec.Aggregate)
	out.Collect(sdk.Record{Key: bytes.Clone(key), Value: v, Timestamp: window.MaxTimestamp(end)})
}
