// Package builtin registers every built-in operator and connector with
// internal/connector. The composition roots (the daemons, the CLI, the Go
// API) import it for its side effect; the packages that iterate the
// registry (the job graph's validation, the JobManager) do not, so they
// link no connector.
package builtin

import (
	// Kafka in and out.
	_ "github.com/weirproject/weir/internal/kafka/kafkacfg"
	// The operators of job specs: sources, transforms, the file sink.
	_ "github.com/weirproject/weir/internal/operators/opspec"
)
