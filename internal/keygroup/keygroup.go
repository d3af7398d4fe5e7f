// Package keygroup assigns keys to key groups and key groups to subtasks, the
// way Flink's KeyGroupRangeAssignment does, so keyed state can be restored at
// a different parallelism.
package keygroup

import "hash/fnv"

// Range is an inclusive range of key groups. An empty range has End < Start.
type Range struct {
	Start, End int
}

// Contains reports whether kg lies in r.
func (r Range) Contains(kg int) bool { return kg >= r.Start && kg <= r.End }

// Overlap is how many key groups r and o share.
func (r Range) Overlap(o Range) int {
	return max(0, min(r.End, o.End)-max(r.Start, o.Start)+1)
}

// Of returns the key group of key.
func Of(key []byte, maxParallelism int) int {
	h := fnv.New32a()
	_, _ = h.Write(key)
	return int(h.Sum32() % uint32(maxParallelism))
}

// OperatorIndex returns the subtask that owns key group kg.
func OperatorIndex(kg, maxParallelism, parallelism int) int {
	return kg * parallelism / maxParallelism
}

// RangeFor returns the key groups subtask index owns.
func RangeFor(maxParallelism, parallelism, index int) Range {
	start := (index*maxParallelism + parallelism - 1) / parallelism
	end := ((index+1)*maxParallelism - 1) / parallelism
	return Range{Start: start, End: end}
}
