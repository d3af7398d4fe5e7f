package watermark

import "fmt"

// Valve merges the watermarks and statuses of a subtask's input channels
// (Flink's StatusWatermarkValve). The output watermark is the minimum over
// the channels that are active, not finished and aligned; it only ever
// increases. The output is idle when every channel that has not finished is
// idle.
//
// A channel is aligned while its watermark is at least the output. One that
// resumes from idle behind the output is not: counting it would move the
// output backwards. It rejoins once its watermark catches up, and meanwhile
// neither holds the output back nor advances it.
type Valve struct {
	chans []channel
	wm    int64
	idle  bool
}

type channel struct {
	wm       int64
	idle     bool
	finished bool
	aligned  bool
}

// ChannelInfo is the state of one input channel.
type ChannelInfo struct {
	Watermark               int64
	Idle, Finished, Aligned bool
}

// Explanation is a valve's state, for answering "why does my window not
// fire".
type Explanation struct {
	Watermark int64
	Idle      bool
	Channels  []ChannelInfo
	// Holding lists the channels whose watermark is the current minimum
	// among active aligned channels: the ones holding the output back. It
	// is empty while no channel is active and aligned; then the output
	// waits for an unaligned channel to catch up, or for any to resume.
	Holding []int
}

// NewValve returns a valve for n input channels, all active with no
// watermark yet. A source has no input channels; NewValve(0) is valid but
// its output never moves.
func NewValve(n int) *Valve {
	v := &Valve{chans: make([]channel, n), wm: Min}
	for i := range v.chans {
		v.chans[i] = channel{wm: Min, aligned: true}
	}
	return v
}

// OnWatermark handles a watermark from channel ch. Watermarks that do not
// increase the channel's (duplicates, reordering) are ignored, as are those
// of idle or finished channels: an idle upstream announces itself active
// before it promises anything again.
func (v *Valve) OnWatermark(ch int, wm int64) Output {
	c := v.channel(ch)
	if c.idle || c.finished || wm <= c.wm {
		return v.output(v.wm, v.idle)
	}
	c.wm = wm
	if wm >= v.wm {
		c.aligned = true
	}
	return v.update()
}

// OnStatus handles a status change of channel ch. Repeated statuses and
// those of finished channels are ignored.
func (v *Valve) OnStatus(ch int, idle bool) Output {
	c := v.channel(ch)
	if c.finished || c.idle == idle {
		return v.output(v.wm, v.idle)
	}
	c.idle = idle
	// An idle channel drops out; an active one rejoins only if it does not
	// pull the output back.
	c.aligned = !idle && c.wm >= v.wm
	return v.update()
}

// OnEndOfPartition handles the end of channel ch: it no longer holds the
// output back, as if its watermark were +inf. Once every channel has
// finished the output is Max.
func (v *Valve) OnEndOfPartition(ch int) Output {
	c := v.channel(ch)
	if c.finished {
		return v.output(v.wm, v.idle)
	}
	c.finished, c.idle, c.aligned = true, false, false
	return v.update()
}

// Watermark is the output watermark.
func (v *Valve) Watermark() int64 { return v.wm }

// Idle is the output status.
func (v *Valve) Idle() bool { return v.idle }

// Explain returns the valve's state.
func (v *Valve) Explain() Explanation {
	e := Explanation{Watermark: v.wm, Idle: v.idle, Channels: make([]ChannelInfo, len(v.chans))}
	low, ok := v.alignedMin()
	for i, c := range v.chans {
		e.Channels[i] = ChannelInfo{Watermark: c.wm, Idle: c.idle, Finished: c.finished, Aligned: c.aligned}
		if ok && c.aligned && c.wm == low {
			e.Holding = append(e.Holding, i)
		}
	}
	return e
}

func (v *Valve) channel(ch int) *channel {
	if ch < 0 || ch >= len(v.chans) {
		panic(fmt.Sprintf("watermark: channel %d out of range [0,%d)", ch, len(v.chans)))
	}
	return &v.chans[ch]
}

// alignedMin is the minimum watermark over the channels that count; only
// active unfinished channels are ever aligned.
func (v *Valve) alignedMin() (int64, bool) {
	low, ok := Max, false
	for _, c := range v.chans {
		if c.aligned {
			low, ok = min(low, c.wm), true
		}
	}
	return low, ok
}

// update recomputes the output after a channel changed.
func (v *Valve) update() Output {
	prevWm, prevIdle := v.wm, v.idle
	live, active, high := 0, 0, Min
	for _, c := range v.chans {
		if c.finished {
			continue
		}
		live++
		high = max(high, c.wm)
		if !c.idle {
			active++
		}
	}
	switch {
	case live == 0:
		// Active, so that consumers do not ignore the final Max.
		v.wm, v.idle = Max, false
	case active == 0:
		v.idle = true
		if !prevIdle {
			// No channel will advance any more, so nothing is gained by
			// holding the output at the slowest one: flush to the highest
			// (Flink does the same), or timers here would never fire while
			// the input is quiet. Flink only flushes when the channel that
			// just went idle held the minimum; flushing on every transition
			// also covers an unaligned channel being the last to go idle.
			v.wm = max(v.wm, high)
		}
	default:
		v.idle = false
		if low, ok := v.alignedMin(); ok && low > v.wm {
			v.wm = low
		}
	}
	return v.output(prevWm, prevIdle)
}

func (v *Valve) output(prevWm int64, prevIdle bool) Output {
	return Output{Watermark: v.wm, Advanced: v.wm > prevWm, StatusChanged: v.idle != prevIdle, Idle: v.idle}
}
