// Command taskmanager runs a Weir TaskManager with the built-in operators.
package main

import (
	"github.com/weirproject/weir/sdk"
	"github.com/weirproject/weir/worker"
)

func main() { worker.Main(sdk.NewRegistry()) }
