package proc

import (
	"os"
	"os/signal"
	"syscall"
)

func waitTERM() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	<-c
}
