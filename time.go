package weir

import "time"

// Time is a point in event time or processing time: milliseconds since the
// Unix epoch, as records, watermarks and timers carry it. It is an integer,
// so times compare and subtract as such; Add and Time convert.
type Time int64

// TimeOf is t, to the millisecond.
func TimeOf(t time.Time) Time { return Time(t.UnixMilli()) }

// Time is t as a time.Time, in UTC.
func (t Time) Time() time.Time { return time.UnixMilli(int64(t)).UTC() }

// Add is t + d, to the millisecond.
func (t Time) Add(d time.Duration) Time { return t + Time(d.Milliseconds()) }
