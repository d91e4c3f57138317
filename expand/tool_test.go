package expand

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestToolParametersAreASchema(t *testing.T) {
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal([]byte(ToolParameters), &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || len(schema.Properties) != 2 || len(schema.Required) != 1 || schema.Required[0] != "ref" {
		t.Errorf("schema %+v", schema)
	}
	if strings.Count(ToolDescription, ". ") > 0 || !strings.Contains(ToolDescription, "intact") {
		t.Errorf("the description is not one sentence that says the text is intact: %q", ToolDescription)
	}
}

func TestRetrieve(t *testing.T) {
	text := "one\ntwo\nthree\nfour\n"
	ref := Ref(text)
	kept := map[string]Original{ref: New(KindSquash, "bash", text)}
	get := func(r string) (Original, bool, error) {
		if r == "000000000000" {
			return Original{}, false, errors.New("store down")
		}
		o, ok := kept[r]
		return o, ok, nil
	}
	rows := []struct {
		name, args, want string
		isError          bool
	}{
		{"a range, byte for byte", `{"ref":"` + ref + `","lines":"2-3"}`, "two\nthree\n", false},
		{"the whole text", `{"ref":"` + ref + `"}`, text, false},
		{"a reference in capitals", `{"ref":"` + strings.ToUpper(ref) + `","lines":"4"}`, "four\n", false},
		{"from a line to the end", `{"ref":"` + ref + `","lines":"3-"}`, "three\nfour\n", false},
		{"a range past the end", `{"ref":"` + ref + `","lines":"9-12"}`, ToolName + ": the original " + ref + " has 4 lines; ask for lines within them", true},
		{"arguments that are no JSON", `{"ref":`, "", true},
		{"no reference", `{"lines":"1-2"}`, "", true},
		{"a reference that is none", `{"ref":"../../etc/passwd"}`, "", true},
		{"lines it cannot read", `{"ref":"` + ref + `","lines":"b-a"}`, ToolName + ": " + ErrBadLines.Error(), true},
		{"a reference not kept", `{"ref":"abcdefabcdef"}`, ToolName + ": no original is kept under abcdefabcdef (never kept here, or expired)", true},
		{"a store that fails", `{"ref":"000000000000"}`, "", true},
	}
	for _, r := range rows {
		got, isErr := Retrieve(r.args, get)
		if isErr != r.isError || (r.want != "" && got != r.want) {
			t.Errorf("%s: %q (error %v), want %q (error %v)", r.name, got, isErr, r.want, r.isError)
		}
		if isErr && !strings.HasPrefix(got, ToolName+": ") {
			t.Errorf("%s: the error %q does not say whose it is", r.name, got)
		}
	}
}

// A range larger than one call returns is cut at a line end, and the note
// names the lines that follow.
func TestRetrieveCutsWhatIsTooLarge(t *testing.T) {
	var b strings.Builder
	for b.Len() <= 2*MaxToolResult {
		b.WriteString(strings.Repeat("x", 99) + "\n")
	}
	text := b.String()
	get := func(string) (Original, bool, error) { return New(KindPrune, "read", text), true, nil }
	got, isErr := Retrieve(`{"ref":"`+Ref(text)+`","lines":"11-"}`, get)
	if isErr || len(got) > MaxToolResult+200 {
		t.Fatalf("%d bytes (error %v)", len(got), isErr)
	}
	body, note, _ := strings.Cut(got, "\n[")
	shown := strings.Count(body, "\n")
	if !strings.HasSuffix(body, "\n") || !strings.HasPrefix(Slice(text, Lines{From: 11}), body) {
		t.Error("what is returned is not the start of the range")
	}
	want := "ask for lines " + strconv.Itoa(11+shown) + "-" + strconv.Itoa(CountLines(text)) + " for the rest]"
	if !strings.HasSuffix(note, want) {
		t.Errorf("note %q, want it to end %q", note, want)
	}
}
