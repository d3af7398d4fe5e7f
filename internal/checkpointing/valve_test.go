package checkpointing

import (
	"slices"
	"testing"
)

// TestEventValve: the valve is held per checkpoint; it opens when the last
// checkpoint holding it lets go, releasing the held events in order, and an
// event sent while releasing goes out behind them.
func TestEventValve(t *testing.T) {
	var v EventValve
	var got []string
	send := func(name string) { v.Send(func() { got = append(got, name) }) }
	want := func(w ...string) {
		t.Helper()
		if !slices.Equal(got, w) {
			t.Fatalf("delivered %v, want %v", got, w)
		}
	}

	send("a")
	want("a") // open: at once

	v.close(1)
	send("b")
	v.close(2)
	send("c")
	v.open(3) // never held it
	v.open(1) // 2 still holds it
	send("d")
	want("a")

	v.open(2)
	want("a", "b", "c", "d")
	send("e")
	want("a", "b", "c", "d", "e")

	// Releasing, the first held event sends another one: it goes last.
	v.close(3)
	v.Send(func() {
		got = append(got, "f")
		send("h") // sent while releasing
	})
	send("g")
	v.open(3)
	want("a", "b", "c", "d", "e", "f", "g", "h")

	// Opening twice, or for a checkpoint that is done, changes nothing.
	v.close(4)
	v.open(4)
	v.open(4)
	send("i")
	want("a", "b", "c", "d", "e", "f", "g", "h", "i")
}
