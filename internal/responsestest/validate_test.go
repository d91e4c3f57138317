package responsestest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Items as codex 0.171 sends them (see testdata).
const (
	dev     = `{"type":"message","id":"msg_dev","role":"developer","content":[{"type":"input_text","text":"You are codex."}]}`
	ask     = `{"type":"message","id":"msg_ask","role":"user","content":[{"type":"input_text","text":"List the functions"}]}`
	ask2    = `{"type":"message","role":"user","content":"Go on"}`
	rs1     = `{"type":"reasoning","id":"rs_1","summary":[],"content":null,"encrypted_content":"ENC1"}`
	fc1     = `{"type":"function_call","id":"fc_1","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"call_1"}`
	out1    = `{"type":"function_call_output","id":"fco_1","call_id":"call_1","output":"Chunk ID: 1\nOutput:\na.py\n"}`
	rs2     = `{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"t"}],"encrypted_content":"ENC2"}`
	ctc2    = `{"type":"custom_tool_call","id":"ctc_2","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch"}`
	ctco2   = `{"type":"custom_tool_call_output","id":"ctco_2","call_id":"call_2","output":"Exit code: 0"}`
	rs3     = `{"type":"reasoning","id":"rs_3","summary":[],"encrypted_content":"ENC3"}`
	msg3    = `{"type":"message","id":"msg_3","role":"assistant","content":[{"type":"output_text","text":"Done."}]}`
	partOut = `{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:"}]}`
)

// summaryAsk is the instruction of a ctxpress summary call that continues
// the conversation.
var summaryAsk = `{"type":"message","role":"user","content":[{"type":"input_text","text":"` + compactor.HistoryLead + ` Summarise."}]}`

func body(items ...string) string {
	return `{"model":"m","stream":true,"store":false,"include":["reasoning.encrypted_content"],"input":[` + strings.Join(items, ",") + `]}`
}

// upstream is a ledger that issued the three answers above: rs_1 before
// fc_1, rs_2 before ctc_2, rs_3 before msg_3, in responses not stored.
func upstream() *Ledger {
	l := NewLedger()
	l.Record([]byte(`{"id":"resp_1","output":[`+rs1+`,`+fc1+`]}`), false)
	l.Record([]byte(`{"id":"resp_2","output":[`+rs2+`,`+ctc2+`]}`), false)
	l.Record([]byte(`{"id":"resp_3","output":[`+rs3+`,`+msg3+`]}`), true)
	return l
}

// The rows are what api.openai.com refuses (and accepts), with its own
// messages; "" accepts.
// The call kinds beyond function calls, each with its output.
const (
	shellCall    = `{"type":"shell_call","id":"shc_1","call_id":"sh_1","action":{"commands":["ls"]},"status":"completed"}`
	shellOut     = `{"type":"shell_call_output","call_id":"sh_1","output":[{"stdout":"a.go\n","stderr":"","outcome":{"type":"exit","exit_code":0}}]}`
	patchCall    = `{"type":"apply_patch_call","id":"apc_1","call_id":"ap_1","operation":{"type":"update_file","path":"a.go","diff":"@@"},"status":"completed"}`
	patchOut     = `{"type":"apply_patch_call_output","call_id":"ap_1","status":"completed","output":"done"}`
	computerCall = `{"type":"computer_call","id":"cc_1","call_id":"cu_1","action":{"type":"screenshot"},"pending_safety_checks":[],"status":"completed"}`
	computerOut  = `{"type":"computer_call_output","call_id":"cu_1","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,AAAA"}}`
	approvalReq  = `{"type":"mcp_approval_request","id":"mcpr_1","name":"deploy","arguments":"{}","server_label":"ops"}`
	approvalResp = `{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}`
)

func TestRefusesWhatOpenAIRefuses(t *testing.T) {
	loop := []string{dev, ask, rs1, fc1, out1, rs2, ctc2, ctco2, rs3, msg3, ask2}
	cases := []struct {
		name    string
		body    string
		ledger  bool
		status  int
		refusal string
	}{
		{"codex's tool loop is accepted", body(loop...), true, 200, ""},
		{"input as a string is accepted", `{"model":"m","input":"hi"}`, false, 200, ""},
		{"a tool output as parts is accepted", body(ask, fc1, partOut), false, 200, ""},
		{"unknown item types and fields pass", body(ask, `{"type":"future_item","x":1}`, `{"type":"message","role":"user","content":"u","extra":{}}`), false, 200, ""},
		{"a compaction trigger last is accepted", body(ask, `{"type":"compaction_trigger"}`), false, 200, ""},
		{"a compaction trigger before another item", body(ask, `{"type":"compaction_trigger"}`, ask2), false, 400, "an item of type 'compaction_trigger' must be the last input item."},
		{"a compaction without encrypted content", body(`{"type":"compaction","id":"cmp_1"}`, ask), false, 400, "Missing required parameter: 'input[0].encrypted_content'."},
		{"every call kind with its output is accepted", body(ask, shellCall, shellOut, patchCall, patchOut, computerCall, computerOut, approvalReq, approvalResp), false, 200, ""},
		{"a shell call output without its call", body(ask, shellOut), false, 400, "No tool call found for shell call output with call_id sh_1."},
		{"an apply_patch output without its call", body(ask, patchOut), false, 400, "No tool call found for apply patch call output with call_id ap_1."},
		{"a computer call output without its call", body(ask, computerOut), false, 400, "No tool call found for computer call output with call_id cu_1."},
		{"an approval response without its request", body(ask, approvalResp), false, 400, "No tool call found for mcp approval response with call_id mcpr_1."},
		{"a shell call left without its output", body(ask, shellCall, ask2), false, 400, "No tool output found for shell call sh_1."},
		{"an approval request left open is accepted", body(ask, approvalReq, ask2), false, 200, ""},
		{"an output without its call", body(ask, out1), false, 400, "No tool call found for function call output with call_id call_1."},
		{"an output before its call", body(ask, out1, fc1), false, 400, "No tool call found for function call output with call_id call_1."},
		{"a custom tool output without its call", body(ask, ctco2), false, 400, "No tool call found for custom tool call output with call_id call_2."},
		{"a call left without its output at the end", body(ask, fc1), false, 400, "No tool output found for function call call_1."},
		{"a call left without its output before the next user message", body(ask, fc1, ask2, out1), false, 400, "No tool output found for function call call_1."},
		{"parallel calls then their outputs are accepted", body(ask, fc1, ctc2, out1, ctco2), false, 200, ""},
		{"a reasoning item last", body(ask, rs1), false, 400, "Item 'rs_1' of type 'reasoning' was provided without its required following item."},
		{"a reasoning item before a user message", body(ask, rs1, ask2), false, 400, "Item 'rs_1' of type 'reasoning' was provided without its required following item."},
		{"a reasoning item before a tool output", body(ask, fc1, rs1, out1), false, 400, "Item 'rs_1' of type 'reasoning' was provided without its required following item."},
		{"a reasoning item separated from its call", body(ask, rs1, rs2, ctc2, ctco2, fc1, out1), true, 400, "Item 'rs_1' of type 'reasoning' was provided without its required following item."},
		{"a reasoning item before another call than its own", body(ask, rs1, ctc2, ctco2), true, 400, "Item 'rs_1' of type 'reasoning' was provided without its required following item."},
		{"a call whose reasoning item was dropped", body(ask, fc1, out1), true, 400, "Item 'fc_1' of type 'function_call' was provided without its required 'reasoning' item: 'rs_1'."},
		{"edited encrypted content", body(ask, strings.Replace(rs1, "ENC1", "ENC1x", 1), fc1, out1), true, 400, "The encrypted content for item rs_1 could not be verified. Reason: Encrypted content could not be decrypted or parsed."},
		{"encrypted content the upstream never issued", body(ask, `{"type":"compaction","id":"cmp_9","encrypted_content":"FORGED"}`), true, 400, "The encrypted content for item cmp_9 could not be verified."},
		{"a reasoning item without encrypted content under store:false", body(ask, `{"type":"reasoning","id":"rs_1","summary":[]}`, fc1, out1), false, 404, "Item with id 'rs_1' not found. Items are not persisted when `store` is set to false."},
		{"an item reference under store:false", body(ask, `{"type":"item_reference","id":"msg_3"}`), false, 404, "Items are not persisted when `store` is set to false."},
		{"an item reference to a stored item is accepted", `{"model":"m","input":[` + ask + `,{"type":"item_reference","id":"msg_3"}]}`, true, 200, ""},
		{"a previous_response_id the server never issued", `{"model":"m","previous_response_id":"resp_invented","input":"hi"}`, true, 400, "Previous response with id 'resp_invented' not found."},
		{"a previous_response_id of an unstored response", `{"model":"m","previous_response_id":"resp_1","input":"hi"}`, true, 400, "Previous response with id 'resp_1' not found."},
		{"a previous_response_id of a stored response is accepted", `{"model":"m","previous_response_id":"resp_3","input":"hi"}`, true, 200, ""},
		{"a duplicate item id", body(ask, rs1, fc1, out1, rs1, fc1), false, 400, "Duplicate item found with id rs_1. Remove duplicate items from your input and try again."},
		{"a function call without call_id", body(ask, `{"type":"function_call","name":"x","arguments":"{}"}`), false, 400, "Missing required parameter: 'input[1].call_id'."},
		{"arguments as an object", body(ask, `{"type":"function_call","call_id":"c","name":"x","arguments":{}}`, `{"type":"function_call_output","call_id":"c","output":"o"}`), false, 400, "Invalid type for 'input[1].arguments': expected a string"},
		{"an output as an object", body(ask, fc1, `{"type":"function_call_output","call_id":"call_1","output":{"text":"a"}}`), false, 400, "Invalid type for 'input[2].output'"},
		{"an output part of an output type", body(ask, fc1, `{"type":"function_call_output","call_id":"call_1","output":[{"type":"output_text","text":"a"}]}`), false, 400, "Invalid value: 'output_text'."},
		{"an unknown role", body(`{"type":"message","role":"tool","content":"x"}`), false, 400, "Invalid value: 'tool'. Supported values are"},
		{"input_text in an assistant message", body(ask, `{"type":"message","role":"assistant","content":[{"type":"input_text","text":"x"}]}`), false, 400, "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'."},
		{"no model", `{"input":"hi"}`, false, 400, "Missing required parameter: 'model'."},
		{"store as a string", `{"model":"m","store":"false","input":"hi"}`, false, 400, "Invalid type for 'store': expected a boolean"},
		{"not JSON", `{"model":`, false, 400, "We could not parse the JSON body of your request."},
		{"a request that asks to compact is accepted", `{"model":"m","context_management":[{"type":"compaction","compact_threshold":9000}],"input":[` + ask + `,{"type":"compaction_trigger"}]}`, false, 200, ""},
		{"a plain summary call is accepted", body(ask, summaryAsk), false, 200, ""},
		{"a summary call asking to compact", `{"model":"m","context_management":[{"type":"compaction","compact_threshold":9000}],"input":[` + ask + `,` + summaryAsk + `]}`, false, 400,
			"A ctxpress summary call must not carry 'context_management'"},
		{"a summary call continuing a stored response", `{"model":"m","previous_response_id":"resp_3","input":[` + summaryAsk + `]}`, true, 400,
			"A ctxpress summary call must not carry 'previous_response_id'"},
		{"a summary call with a compaction trigger", body(ask, `{"type":"compaction_trigger"}`, summaryAsk), false, 400,
			"A ctxpress summary call must not carry a compaction_trigger item"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o Options
			if c.ledger {
				o.Ledger = upstream()
			}
			_, err := Check([]byte(c.body), o)
			switch {
			case c.refusal == "" && err != nil:
				t.Fatalf("refused: %d %s", err.Status, err.Body())
			case c.refusal != "" && err == nil:
				t.Fatalf("accepted, want %d %q", c.status, c.refusal)
			case c.refusal != "" && (err.Status != c.status || !strings.Contains(err.Message, c.refusal)):
				t.Fatalf("got %d %q, want %d %q", err.Status, err.Message, c.status, c.refusal)
			case err != nil && err.Type != "invalid_request_error":
				t.Fatalf("type %q", err.Type)
			}
		})
	}
}

// The late-outputs option accepts what OpenAI itself accepts: an output
// after the next message, paired by call_id.
func TestLateOutputsAreOpenAIsOwnRule(t *testing.T) {
	b := []byte(body(ask, fc1, ask2, out1))
	if _, err := Check(b, Options{}); err == nil {
		t.Fatal("a late output accepted by default")
	}
	if _, err := Check(b, Options{LateOutputs: true}); err != nil {
		t.Fatalf("refused with late outputs allowed: %s", err.Body())
	}
}

// Compared with the client's body, a proxy may not flip store, invent or
// drop previous_response_id, or send item ids the client never sent.
func TestAProxyChangesNothingItMustNot(t *testing.T) {
	client := body(ask, rs1, fc1, out1)
	summary := `{"type":"message","role":"user","content":"<conversation_summary>s</conversation_summary>"}`
	cases := []struct {
		name, forwarded, code string
	}{
		{"the body as sent", client, ""},
		{"a summary message without an id", body(summary, ask, rs1, fc1, out1), ""},
		{"store flipped to true", strings.Replace(client, `"store":false`, `"store":true`, 1), "proxy_changed_store"},
		{"store dropped", strings.Replace(client, `"store":false,`, ``, 1), "proxy_changed_store"},
		{"a previous_response_id invented", strings.Replace(client, `"model":"m",`, `"model":"m","previous_response_id":"resp_1",`, 1), "proxy_changed_previous_response_id"},
		{"an item id invented", body(`{"type":"message","id":"msg_ctxpress","role":"user","content":"s"}`, ask, rs1, fc1, out1), "proxy_invented_item_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Check([]byte(c.forwarded), Options{Client: []byte(client)})
			got := ""
			if err != nil {
				got = err.Code
			}
			if got != c.code {
				t.Fatalf("code %q (%v), want %q", got, err, c.code)
			}
		})
	}
}

// The error body is OpenAI's shape, nulls included.
func TestErrorBodyIsOpenAIs(t *testing.T) {
	_, err := Check([]byte(body(ask, out1)), Options{})
	want := `{"error":{"code":null,"message":"No tool call found for function call output with call_id call_1.","param":"input","type":"invalid_request_error"}}`
	if string(err.Body()) != want {
		t.Fatalf("%s\nwant %s", err.Body(), want)
	}
}

func fixtures(t *testing.T) map[string][]byte {
	t.Helper()
	paths, _ := filepath.Glob("testdata/*.json")
	if len(paths) < 3 {
		t.Fatalf("fixtures: %v", paths)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// ledgerOf is the ledger of the upstream that answered a captured
// conversation: each reasoning item was issued together with the item
// after it.
func ledgerOf(b []byte) *Ledger {
	l := NewLedger()
	in := gjson.GetBytes(b, "input").Array()
	for i, it := range in {
		if it.Get("type").String() == "reasoning" && i+1 < len(in) {
			l.Record([]byte(`{"id":"resp_`+it.Get("id").String()+`","output":[`+it.Raw+`,`+in[i+1].Raw+`]}`), false)
		}
	}
	return l
}

// What codex 0.171 really sent is accepted, with the ledger of the
// upstream that answered it; breaking any reasoning item in it is refused.
func TestCodexTrafficIsAcceptedAndBreakingItIsNot(t *testing.T) {
	for name, b := range fixtures(t) {
		t.Run(name, func(t *testing.T) {
			l := ledgerOf(b)
			r, err := Check(b, Options{Ledger: l, Client: b})
			if err != nil {
				t.Fatalf("refused: %s", err.Body())
			}
			if r.Store || !r.Stream || len(r.Tools) == 0 && !strings.Contains(name, "own-compaction") {
				t.Fatalf("read %+v", r)
			}
			broken := 0
			for i, it := range r.Items {
				if it.Type != "reasoning" {
					continue
				}
				broken++
				enc := gjson.Get(it.Raw, "encrypted_content").String()
				edited, _ := sjson.SetBytes(b, "input."+strconv.Itoa(i)+".encrypted_content", enc[:len(enc)-2]+"AA")
				if _, err := Check(edited, Options{Ledger: l}); err == nil || err.Code != "invalid_encrypted_content" {
					t.Fatalf("edited encrypted content of item %d: %v", i, err)
				}
				dropped, _ := sjson.DeleteBytes(b, "input."+strconv.Itoa(i))
				if _, err := Check(dropped, Options{Ledger: l}); err == nil || !strings.Contains(err.Message, "required 'reasoning' item") {
					t.Fatalf("dropped reasoning item %d: %v", i, err)
				}
			}
			if broken == 0 && !strings.Contains(name, "after-own-compaction") {
				t.Fatal("no reasoning item in the capture")
			}
		})
	}
}
