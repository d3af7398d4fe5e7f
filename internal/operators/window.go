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
//
// The window logic is the same for every aggregation: an Aggregator folds
// records into accumulators (opaque bytes in state) and turns one into the
// window's record. The built-in aggregates are one; the Go API's typed
// aggregate and reduce functions are others.
type Window struct {
	// Spec and Agg are set by the Go API; the built-in operator reads
	// them from its configuration.
	Spec window.Spec
	Agg  Aggregator

	ctx    sdk.Context
	timers sdk.TimerService
	// panes (tumbling, sliding) is keyed map state keyed by
	// window.TimeKey of the pane start; sessions keyed state holding a
	// key's sessions.
	panes    sdk.MapState
	sessions sdk.ValueState
	buf      []byte
}

// Aggregator is what a window computes. Accumulators are bytes kept in
// keyed state; nil is the empty one. The slices Add and Merge get are not
// theirs to keep; the ones they return may be their arguments.
type Aggregator interface {
	Add(acc []byte, r sdk.Record) ([]byte, error)
	Merge(a, b []byte) ([]byte, error)
	// Result is the record a window [start, end) of key emits.
	Result(key []byte, start, end int64, acc []byte) (sdk.Record, error)
}

// decimalAggregator is the built-in aggregate over decimal values: an
// accumulator is a window.Acc, the result "<start>,<end>,<result>".
type decimalAggregator struct {
	agg window.Aggregate
	// buf is the accumulator Add returns: state copies what it is given,
	// and the one it holds may be in a snapshot being written.
	buf []byte
}

func (d *decimalAggregator) Add(acc []byte, r sdk.Record) ([]byte, error) {
	var a window.Acc
	if acc != nil {
		if err := a.UnmarshalBinary(acc); err != nil {
			return nil, err
		}
	}
	var v int64
	if d.agg != window.Count {
		var err error
		if v, err = parseInt(r.Value); err != nil {
			return nil, fmt.Errorf("value of key %q: %w", r.Key, err)
		}
	}
	a.Add(v)
	d.buf, _ = a.AppendBinary(d.buf[:0])
	return d.buf, nil
}

func (d *decimalAggregator) Merge(x, y []byte) ([]byte, error) {
	var a, b window.Acc
	if err := a.UnmarshalBinary(x); err != nil {
		return nil, err
	}
	if err := b.UnmarshalBinary(y); err != nil {
		return nil, err
	}
	a.Merge(b)
	return a.AppendBinary(nil)
}

func (d *decimalAggregator) Result(key []byte, start, end int64, acc []byte) (sdk.Record, error) {
	var a window.Acc
	if err := a.UnmarshalBinary(acc); err != nil {
		return sdk.Record{}, err
	}
	v := make([]byte, 0, 48)
	v = strconv.AppendInt(v, start, 10)
	v = append(v, ',')
	v = strconv.AppendInt(v, end, 10)
	v = append(v, ',')
	v = a.AppendResult(v, d.agg)
	return sdk.Record{Key: bytes.Clone(key), Value: v, Timestamp: window.MaxTimestamp(end)}, nil
}

// cleanupNS is the namespace of a window's clean-up timer; its firing
// timer has none.
var cleanupNS = []byte("c")

func (w *Window) Open(ctx sdk.Context) error {
	if w.Agg == nil {
		spec, err := window.Parse(ctx.Config())
		if err != nil {
			return fmt.Errorf("window: %w", err)
		}
		w.Spec, w.Agg = spec, &decimalAggregator{agg: spec.Aggregate}
	}
	w.ctx, w.timers = ctx, ctx.TimerService()
	if w.Spec.Kind == window.Session {
		w.sessions = ctx.ValueState("sessions")
	} else {
		w.panes = ctx.MapState("panes")
	}
	return nil
}

func (w *Window) Close() error { return nil }

func (w *Window) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	ts := r.Timestamp
	if w.Spec.ProcessingTime {
		ts = w.timers.CurrentProcessingTime()
	}
	if w.Spec.Kind == window.Session {
		return w.addToSession(r, ts, out)
	}
	return w.addToPane(r, ts, out)
}

// watermark is the time windows are judged by: the input watermark, or
// nothing is ever late on processing time.
func (w *Window) watermark() int64 {
	if w.Spec.ProcessingTime {
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
	return wm != sdk.MinWatermark && window.MaxTimestamp(end) <= wm-w.Spec.Lateness
}

func (w *Window) register(ns []byte, ts int64) {
	if w.Spec.ProcessingTime {
		w.timers.RegisterProcessingTimeTimer(ns, ts)
	} else {
		w.timers.RegisterEventTimeTimer(ns, ts)
	}
}

func (w *Window) deleteTimer(ns []byte, ts int64) {
	if w.Spec.ProcessingTime {
		w.timers.DeleteProcessingTimeTimer(ns, ts)
	} else {
		w.timers.DeleteEventTimeTimer(ns, ts)
	}
}

func (w *Window) addToPane(r sdk.Record, ts int64, out sdk.Collector) error {
	s, wm := w.Spec, w.watermark()
	p := s.PaneStart(ts)
	if w.cleaned(s.LastEnd(p), wm) {
		w.ctx.EmitLate(r)
		return nil
	}
	w.buf = window.TimeKey(w.buf[:0], p)
	prev, _ := w.panes.Get(w.buf)
	acc, err := w.Agg.Add(prev, r)
	if err != nil {
		return fmt.Errorf("window: key %q: %w", r.Key, err)
	}
	w.panes.Put(w.buf[:8], acc)
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
	if w.Spec.Kind == window.Session {
		return w.onSessionTimer(t, out)
	}
	if bytes.Equal(t.Namespace, cleanupNS) {
		w.dropPanes(t.Timestamp - w.Spec.Lateness + 1)
		return nil
	}
	end := t.Timestamp + 1
	if err := w.firePanes(t.Key, end, out); err != nil {
		return err
	}
	if w.Spec.Lateness > 0 {
		w.register(cleanupNS, t.Timestamp+w.Spec.Lateness)
	} else {
		w.dropPanes(end)
	}
	// The next window, if it has data: the panes in [end, end+slide) got
	// it a timer with their first record; the ones this window shares
	// with it did not.
	if w.Spec.Slide < w.Spec.Size {
		for p := end + w.Spec.Slide - w.Spec.Size; p < end; p += w.Spec.Pane() {
			if w.panes.Contains(window.TimeKey(w.buf[:0], p)) {
				w.register(nil, window.MaxTimestamp(end+w.Spec.Slide))
				break
			}
		}
	}
	return nil
}

// firePanes emits the result of key's window ending at end, merged from
// its panes, each looked up by its start: no scan of the key's state.
func (w *Window) firePanes(key []byte, end int64, out sdk.Collector) error {
	var acc []byte
	for p := end - w.Spec.Size; p < end; p += w.Spec.Pane() {
		w.buf = window.TimeKey(w.buf[:0], p)
		b, ok := w.panes.Get(w.buf)
		if !ok {
			continue
		}
		if acc == nil {
			acc = b
			continue
		}
		var err error
		if acc, err = w.Agg.Merge(acc, b); err != nil {
			return fmt.Errorf("window: state of key %q: %w", key, err)
		}
	}
	if acc == nil {
		return nil
	}
	return w.emit(key, end-w.Spec.Size, end, acc, out)
}

// dropPanes removes the panes that no window ending after end holds.
// Windows fire (and are cleaned) in order, so only the ones the window
// ending at end was the last to hold are left of them: [end−size,
// end−size+slide).
func (w *Window) dropPanes(end int64) {
	for p := end - w.Spec.Size; p < end-w.Spec.Size+w.Spec.Slide; p += w.Spec.Pane() {
		w.buf = window.TimeKey(w.buf[:0], p)
		w.panes.Remove(w.buf)
	}
}

// session is one session window of a key as kept in state.
type session struct {
	start, end int64
	acc        []byte
}

// readSessions decodes the key's sessions: one value holding them all, as
// a key has few open at once, so a record costs one read and one write.
func (w *Window) readSessions(key []byte) ([]session, error) {
	b, ok := w.sessions.Value()
	if !ok {
		return nil, nil
	}
	var ss []session
	for len(b) > 0 {
		start, n := binary.Varint(b)
		if n <= 0 {
			return nil, fmt.Errorf("window: state of key %q: corrupt session", key)
		}
		b = b[n:]
		end, n := binary.Varint(b)
		if n <= 0 {
			return nil, fmt.Errorf("window: state of key %q: corrupt session", key)
		}
		b = b[n:]
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, fmt.Errorf("window: state of key %q: corrupt session", key)
		}
		ss = append(ss, session{start: start, end: end, acc: b[n : n+int(l) : n+int(l)]})
		b = b[n+int(l):]
	}
	return ss, nil
}

// writeSessions stores the key's sessions, or clears them when none is
// left.
func (w *Window) writeSessions(ss []session) {
	if len(ss) == 0 {
		w.sessions.Clear()
		return
	}
	w.buf = w.buf[:0]
	for _, s := range ss {
		w.buf = binary.AppendVarint(w.buf, s.start)
		w.buf = binary.AppendVarint(w.buf, s.end)
		w.buf = binary.AppendUvarint(w.buf, uint64(len(s.acc)))
		w.buf = append(w.buf, s.acc...)
	}
	w.sessions.Update(w.buf)
}

// addToSession merges the record's window [ts, ts+gap) with every session
// of its key it touches (Flink's merging windows).
func (w *Window) addToSession(r sdk.Record, ts int64, out sdk.Collector) error {
	wm := w.watermark()
	ss, err := w.readSessions(r.Key)
	if err != nil {
		return err
	}
	merged := session{start: ts, end: ts + w.Spec.Gap}
	if merged.acc, err = w.Agg.Add(nil, r); err != nil {
		return fmt.Errorf("window: key %q: %w", r.Key, err)
	}
	kept := ss[:0:0]
	var absorbed []session
	for _, s := range ss {
		if s.start <= merged.end && s.end >= merged.start {
			merged.start, merged.end = min(merged.start, s.start), max(merged.end, s.end)
			if merged.acc, err = w.Agg.Merge(merged.acc, s.acc); err != nil {
				return fmt.Errorf("window: state of key %q: %w", r.Key, err)
			}
			absorbed = append(absorbed, s)
			continue
		}
		kept = append(kept, s)
	}
	if w.cleaned(merged.end, wm) {
		w.ctx.EmitLate(r)
		return nil
	}
	w.writeSessions(append(kept, merged))
	if window.MaxTimestamp(merged.end) > wm {
		// A session's timer is armed once, at its first end: when it fires
		// short of the session's end (records extended it), it moves on
		// to the end (onSessionTimer). A record costs no timer work.
		if len(absorbed) == 0 {
			w.register(nil, window.MaxTimestamp(merged.end))
		}
		return nil
	}
	// Late but within the allowed lateness: the session fires again now.
	w.register(cleanupNS, window.MaxTimestamp(merged.end)+w.Spec.Lateness)
	return w.emit(r.Key, merged.start, merged.end, merged.acc, out)
}

func (w *Window) onSessionTimer(t sdk.Timer, out sdk.Collector) error {
	cleanup := bytes.Equal(t.Namespace, cleanupNS)
	end := t.Timestamp + 1
	if cleanup {
		end -= w.Spec.Lateness
	}
	ss, err := w.readSessions(t.Key)
	if err != nil {
		return err
	}
	for i, s := range ss {
		if !cleanup && s.start <= t.Timestamp && t.Timestamp < window.MaxTimestamp(s.end) {
			// Armed at an end the session has grown past.
			w.register(nil, window.MaxTimestamp(s.end))
			return nil
		}
		if s.end != end {
			continue
		}
		if !cleanup {
			if err := w.emit(t.Key, s.start, s.end, s.acc, out); err != nil {
				return err
			}
			if w.Spec.Lateness > 0 {
				w.register(cleanupNS, t.Timestamp+w.Spec.Lateness)
				return nil
			}
		}
		w.writeSessions(append(ss[:i:i], ss[i+1:]...))
		return nil
	}
	return nil
}

// emit sends one window's result downstream.
func (w *Window) emit(key []byte, start, end int64, acc []byte, out sdk.Collector) error {
	r, err := w.Agg.Result(key, start, end, acc)
	if err != nil {
		return fmt.Errorf("window: result of key %q: %w", key, err)
	}
	out.Collect(r)
	return nil
}
