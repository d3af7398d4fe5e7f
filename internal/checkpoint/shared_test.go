package checkpoint

import "testing"

func TestSharedFileCheckpoint(t *testing.T) {
	for name, want := range map[string]int64{
		SharedFileName("0123abcd", 42, "000007.sst"):         42,
		SharedFileName("0123abcd", 7, "000007.sst") + ".tmp": 7,
	} {
		if id, ok := SharedFileCheckpoint(name); !ok || id != want {
			t.Fatalf("%s: %d %v", name, id, ok)
		}
	}
	if _, ok := SharedFileCheckpoint("000007.sst"); ok {
		t.Fatal("a plain name has no checkpoint")
	}
}
