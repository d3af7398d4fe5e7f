// Package jobgraph is the job graph users write: the YAML job spec parsed
// into the wire JobGraph with line-numbered errors, its defaults (Flink's),
// validation, the graph's topological order and consumers, and the spec
// written back out (a Go program's plan command prints it).
package jobgraph
