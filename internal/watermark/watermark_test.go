package watermark

import (
	"testing"
	"time"
)

func TestNewValveZero(t *testing.T) {
	v := NewValve(0)
	if e := v.Explain(); v.Watermark() != Min || v.Idle() || len(e.Channels) != 0 || len(e.Holding) != 0 {
		t.Fatalf("NewValve(0): %+v", e)
	}
}

func TestValveChannelOutOfRange(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a channel out of range")
		}
	}()
	NewValve(2).OnWatermark(2, 1)
}

func TestOutputString(t *testing.T) {
	for _, c := range []struct {
		o    Output
		want string
	}{
		{Output{Watermark: Min}, "wm=min active"},
		{Output{Watermark: 5, Advanced: true}, "wm=5 advanced active"},
		{Output{Watermark: Max, Advanced: true, StatusChanged: true}, "wm=max advanced active (status changed)"},
		{Output{Watermark: -3, Idle: true, StatusChanged: true}, "wm=-3 idle (status changed)"},
	} {
		if got := c.o.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.o, got, c.want)
		}
	}
}

// A timestamp near Min must not wrap around to a huge watermark.
func TestGeneratorTimestampNearMin(t *testing.T) {
	now := time.Unix(0, 0)
	g := NewGenerator(Strategy{MaxOutOfOrderness: time.Second}, now)
	g.OnRecord("a", Min+10, now)
	if o := g.Poll(now); o.Watermark != Min || o.Advanced {
		t.Fatalf("poll: %v", o)
	}
	g.OnRecord("a", Min+1001, now)
	if o := g.Poll(now); o.Watermark != Min || o.Advanced {
		t.Fatalf("poll: %v", o)
	}
	g.OnRecord("a", Min+1002, now)
	if o := g.Poll(now); o.Watermark != Min+1 || !o.Advanced {
		t.Fatalf("poll: %v", o)
	}
}

// A negative out-of-orderness would let a watermark pass its records.
func TestGeneratorNegativeOutOfOrderness(t *testing.T) {
	now := time.Unix(0, 0)
	g := NewGenerator(Strategy{MaxOutOfOrderness: -time.Second}, now)
	g.OnRecord("", 100, now)
	if o := g.Poll(now); o.Watermark != 99 {
		t.Fatalf("poll: %v", o)
	}
}
