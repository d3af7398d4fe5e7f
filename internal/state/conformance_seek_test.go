package state

import (
	"fmt"
	"iter"
	"strings"
	"testing"
)

type mapSeeker interface {
	Ascend(from []byte) iter.Seq2[[]byte, []byte]
	Descend(below []byte) iter.Seq2[[]byte, []byte]
}

// Ascend and Descend stay within the current key's entries of the named
// state, when other state names and record keys share a prefix with
// them, and with user keys "" and 0xff…, on every backend alike.
func TestConformanceMapSeekPrefixes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 1, 0)
		m, mx := b.MapState("m"), b.MapState("mx")
		for _, key := range []string{"k", "kk", "k\x00", "j", "l"} {
			b.SetCurrentKey([]byte(key))
			for _, uk := range []string{"", "a", "\xff", "\xff\xff"} {
				m.Put([]byte(uk), []byte(key+"/"+uk))
				mx.Put([]byte(uk), []byte("mx"))
			}
		}
		b.SetCurrentKey([]byte("k"))
		list := func(seq iter.Seq2[[]byte, []byte]) string {
			var parts []string
			for k, v := range seq {
				parts = append(parts, fmt.Sprintf("%q=%q", k, v))
			}
			return strings.Join(parts, " ")
		}
		s := m.(mapSeeker)
		for _, c := range []struct {
			from      string
			backwards bool
			want      string
		}{
			{"", false, `""="k/" "a"="k/a" "\xff"="k/\xff" "\xff\xff"="k/\xff\xff"`},
			{"\xff", false, `"\xff"="k/\xff" "\xff\xff"="k/\xff\xff"`},
			{"\xff\xff\xff", false, ``},
			{"", true, ``},
			{"\x00", true, `""="k/"`},
			{"\xff\xff\xff", true, `"\xff\xff"="k/\xff\xff" "\xff"="k/\xff" "a"="k/a" ""="k/"`},
		} {
			seq := s.Ascend([]byte(c.from))
			if c.backwards {
				seq = s.Descend([]byte(c.from))
			}
			if got := list(seq); got != c.want {
				t.Errorf("from %q (backwards %v): %s, want %s", c.from, c.backwards, got, c.want)
			}
		}
		// The empty user key: empty, not nil, as All gives it.
		for k := range s.Ascend(nil) {
			if k == nil {
				t.Errorf("Ascend yields the empty user key as nil, All as empty")
			}
			break
		}
		for k := range m.All() {
			if k == nil {
				t.Errorf("All yields the empty user key as nil")
			}
			break
		}
	})
}

// An iteration made (Ascend/All called) before changes and ranged after:
// both backends see the entries there when the loop begins.
func TestConformanceSeqMadeBeforeChange(t *testing.T) {
	res := map[string]string{}
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 1, 0)
		m := b.MapState("m")
		s := m.(mapSeeker)
		b.SetCurrentKey([]byte("k"))
		m.Put([]byte("a"), []byte("1"))
		list := func(seq iter.Seq2[[]byte, []byte]) string {
			var parts []string
			for k, v := range seq {
				parts = append(parts, string(k)+"="+string(v))
			}
			return strings.Join(parts, " ")
		}
		var out []string
		// 1: a Put after the call.
		seq, all := s.Ascend(nil), m.All()
		m.Put([]byte("b"), []byte("2"))
		out = append(out, "put: ascend["+list(seq)+"] all["+list(all)+"]")
		// 2: the last entry removed after the call.
		b.SetCurrentKey([]byte("j"))
		m.Put([]byte("x"), []byte("9"))
		seq, all = s.Ascend(nil), m.All()
		m.Remove([]byte("x"))
		out = append(out, "remove-last: ascend["+list(seq)+"] all["+list(all)+"]")
		// 3: cleared then put after the call.
		b.SetCurrentKey([]byte("k"))
		seq, all = s.Ascend(nil), m.All()
		m.Clear()
		m.Put([]byte("c"), []byte("3"))
		out = append(out, "clear-put: ascend["+list(seq)+"] all["+list(all)+"]")
		res[k.name] = strings.Join(out, "; ")
		t.Log(res[k.name])
	})
	if res["heap"] != res["pebble"] {
		t.Errorf("backends differ on an iteration made before changes:\nheap:   %s\npebble: %s", res["heap"], res["pebble"])
	}
}
