// Command jobmanager runs a Weir JobManager.
package main

import (
	"os"

	"github.com/weirproject/weir/internal/daemon"
	"github.com/weirproject/weir/internal/jmcmd"
)

func main() { daemon.Exit("jobmanager", jmcmd.Run(os.Args[1:])) }
