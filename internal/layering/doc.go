// Package layering holds the import rules of the tree, pinned by its
// test: the pure cores, state machines driven by events with their I/O
// done by others, link no I/O package, so that they stay testable by
// scenario and simulation and cannot start to block.
package layering
