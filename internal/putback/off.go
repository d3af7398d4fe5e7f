//go:build !failpoints

package putback

// Active reports whether bug is put back: never, without the failpoints
// build tag.
func Active(string) bool { return false }
