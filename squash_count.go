package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire/chat"
	"github.com/ctxpress/ctxpress/wire/responses"
	"github.com/tidwall/gjson"
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

// cmdSquash prints what ctxpress forwards for one tool output, and a stats
// line on stderr. The output goes through the rewrite pipeline the proxy
// runs (the default config, --min-bytes apart) as the result of the call
// --call (or --tool and --args) names, in a chat request, so a file read
// (cat, sed -n, …) is kept whole and a grep is squashed as a search, as
// the proxy does when it sees the call.
func cmdSquash(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("squash", flag.ContinueOnError)
	fs.SetOutput(stderr)
	callJSON := fs.String("call", "", `the call that produced the output, as JSON: {"name":"bash","arguments":{"command":"grep -n foo *.go"}} (arguments an object or a JSON string)`)
	tool := fs.String("tool", "", "the tool that produced the output (instead of --call; exempt tools are left as they are)")
	toolArgs := fs.String("args", "", "with --tool: the call's arguments as JSON, e.g. {\"command\":\"cat main.go\"}")
	minBytes := fs.Int("min-bytes", squash.DefaultMinBytes, "outputs smaller than this are left as they are")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ctxpress squash [--call JSON | --tool NAME [--args JSON]] [--min-bytes N] [FILE|-]")
		fmt.Fprintln(stderr, "prints what ctxpress forwards for a tool output (FILE or stdin) answering that call; a stats line on stderr")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	name, arguments, err := squashCall(*callJSON, *tool, *toolArgs)
	if err != nil {
		fmt.Fprintf(stderr, "ctxpress squash: %v\n", err)
		return 2
	}
	in, err := readInput(fs.Args(), stdin)
	if err != nil {
		fmt.Fprintf(stderr, "ctxpress squash: %v\n", err)
		return 1
	}
	cfg := defaultConfig()
	cfg.Squash.MinBytes = *minBytes
	p := rewrite.New(cfg.pipelineConfig())
	res := p.Rewrite(squashRequest(name, arguments, string(in)))
	content := gjson.GetBytes(res.Body, "messages.2.content")
	if !res.Understood || content.Type != gjson.String {
		fmt.Fprintln(stderr, "ctxpress squash: the pipeline did not understand the request it was given")
		return 1
	}
	out := content.Str
	if _, err := io.WriteString(stdout, out); err != nil {
		return 1
	}
	st := squash.Result{BytesBefore: len(in), BytesAfter: len(out)}
	if len(res.SquashStats) == 1 {
		s := res.SquashStats[0]
		st.Shape, st.TokensBefore, st.TokensAfter = squash.Shape(s.Shape), s.TokensBefore, s.TokensAfter
	} else {
		st.TokensBefore = p.Counter().Count(rewrite.O200K, string(in))
		st.TokensAfter = st.TokensBefore
	}
	fmt.Fprintln(stderr, st.StatsLine())
	return 0
}

// squashCall returns the tool name and the arguments (a JSON text, "{}"
// when none are given) of the call --call, or --tool and --args, name.
func squashCall(callJSON, tool, args string) (name, arguments string, err error) {
	switch {
	case callJSON != "" && (tool != "" || args != ""):
		return "", "", errors.New("--call or --tool/--args, not both")
	case callJSON != "":
		if !gjson.Valid(callJSON) || !gjson.Parse(callJSON).IsObject() {
			return "", "", errors.New(`--call: want a JSON object such as {"name":"bash","arguments":{"command":"ls"}}`)
		}
		c := gjson.Parse(callJSON)
		name = c.Get("name").String()
		switch a := c.Get("arguments"); a.Type {
		case gjson.String:
			arguments = a.Str
		case gjson.Null:
			arguments = ""
		default:
			arguments = a.Raw
		}
	default:
		name, arguments = tool, args
	}
	if arguments == "" {
		arguments = "{}"
	}
	if !gjson.Valid(arguments) {
		return "", "", fmt.Errorf("the call's arguments are not JSON: %s", arguments)
	}
	return name, arguments, nil
}

// squashRequest is a chat-completions request whose last message is output
// answering a call of tool name with arguments, as an agent sends it.
func squashRequest(name, arguments, output string) []byte {
	str := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	return []byte(`{"model":"gpt-4o","messages":[` +
		`{"role":"user","content":"ctxpress squash"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":` + str(name) + `,"arguments":` + str(arguments) + `}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":` + str(output) + `}]}`)
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
