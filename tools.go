package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/ctxpress/ctxpress/wire/chat"
	"github.com/ctxpress/ctxpress/wire/responses"
	"io"
	"os"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
)

// readInput reads the named file, or stdin for "-" or no name.
func readInput(args []string, stdin io.Reader) ([]byte, error) {
	switch {
	case len(args) > 1:
		return nil, errors.New("one input at most")
	case len(args) == 0 || args[0] == "-":
		return io.ReadAll(stdin)
	default:
		return os.ReadFile(args[0])
	}
}

// cmdSquash prints what ctxpress would send for one tool output, and a stats
// line on stderr.
func cmdSquash(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("squash", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tool := fs.String("tool", "", "the tool that produced the output (exempt tools are left as they are)")
	minBytes := fs.Int("min-bytes", squash.DefaultMinBytes, "outputs smaller than this are left as they are")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ctxpress squash [--tool NAME] [--min-bytes N] [FILE|-]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	in, err := readInput(fs.Args(), stdin)
	if err != nil {
		fmt.Fprintf(stderr, "ctxpress squash: %v\n", err)
		return 1
	}
	counter := rewrite.NewCounter(0)
	sq := squash.New(squash.Config{MinBytes: *minBytes, CountTokens: func(s string) int { return counter.Count(rewrite.O200K, s) }})
	res := sq.Apply(*tool, string(in))
	if _, err := io.WriteString(stdout, res.Text); err != nil {
		return 1
	}
	fmt.Fprintln(stderr, res.StatsLine())
	return 0
}

// cmdCount prints the token count of a text, or of a request body (chat
// completions or Responses) with message overhead and tools, as ctxpress
// estimates it.
func cmdCount(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("count", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model whose encoding to use for plain text (default o200k_base); a chat request names its own")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ctxpress count [--model M] [FILE|-]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	in, err := readInput(fs.Args(), stdin)
	if err != nil {
		fmt.Fprintf(stderr, "ctxpress count: %v\n", err)
		return 1
	}
	counter := rewrite.NewCounter(0)
	n, err := counter.CountRequest(chat.Format{}, in)
	if err != nil {
		n, err = counter.CountRequest(responses.Format{}, in)
	}
	if err != nil { // not a request: plain text
		n = counter.CountText(*model, string(in))
	}
	fmt.Fprintln(stdout, n)
	return 0
}

func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
