// Command wordcount counts the words of a generated text with the Go API:
// a source, a flatMap, a keyed rolling reduce and the file sink, exactly
// once through failures.
//
//	go build -o bin/wordcount ./examples/wordcount
//	bin/wordcount taskmanager --jobmanager localhost:6123 &   # next to bin/jobmanager
//	bin/wordcount submit --jobmanager localhost:6123          # prints the job ID
//
// WORDCOUNT_OUT (default /tmp/weir-wordcount) is where the counts go, one
// "word,count" line per word and sentence; WORDCOUNT_LINES bounds the text
// (0: endless), WORDCOUNT_RATE is the lines per second and source subtask.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/files"
	"github.com/weirproject/weir/program"
)

var words = strings.Fields("the quick brown fox jumps over the lazy dog while a stream of words flows past")

// Line is the i-th line of the generated text: every line has the same
// words in another order, so every count is known in advance.
func Line(i int64) string {
	var b strings.Builder
	for k := range int64(5) {
		if k > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(i*7+k*k*3)%int64(len(words))])
	}
	return b.String()
}

type Count struct {
	Word string
	N    int64
}

func main() {
	out := env("WORDCOUNT_OUT", "/tmp/weir-wordcount")
	lines, _ := strconv.ParseInt(env("WORDCOUNT_LINES", "200000"), 10, 64)
	rate, _ := strconv.ParseFloat(env("WORDCOUNT_RATE", "5000"), 64)

	job := weir.NewJob("wordcount", weir.Checkpointing(time.Second))
	text := weir.FromSource(job, "text", weir.Generate(lines, Line, weir.Rate(rate)), weir.Parallelism(2))
	ws := weir.FlatMap(text, "words", func(l string, emit func(Count)) {
		for _, w := range strings.Fields(l) {
			emit(Count{Word: w, N: 1})
		}
	}, weir.Parallelism(2))
	counts := weir.Reduce(weir.KeyBy(ws, func(c Count) string { return c.Word }), "counts",
		func(a, b Count) Count { return Count{Word: a.Word, N: a.N + b.N} }, weir.Parallelism(2))
	weir.SinkTo(counts, "sink", files.Sink(out, func(c Count) string { return fmt.Sprintf("%s,%d", c.Word, c.N) }), weir.Parallelism(2))
	program.Main(job)
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
