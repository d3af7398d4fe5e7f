//go:build !failpoints

package sinktxn

func has(Bug) bool { return false }
