package gemini

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ctxpress/ctxpress/wire"
)

// Reply is an answer ctxpress writes itself.
type Reply = wire.Reply

// replyResponse is a GenerateContentResponse; field order is the wire
// order Google sends.
type replyResponse struct {
	Candidates    []replyCandidate `json:"candidates"`
	UsageMetadata replyUsage       `json:"usageMetadata"`
	ModelVersion  string           `json:"modelVersion"`
	ResponseID    string           `json:"responseId"`
}

type replyCandidate struct {
	Content      replyContent `json:"content"`
	FinishReason string       `json:"finishReason,omitempty"`
	Index        int          `json:"index"`
}

type replyContent struct {
	Parts []replyPart `json:"parts"`
	Role  string      `json:"role"`
}

type replyPart struct {
	Text string `json:"text"`
}

type replyUsage struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount"`
	TotalTokenCount      int `json:"totalTokenCount"`
}

// AssistantReply renders text as the model's whole answer to a request for
// model: a GenerateContentResponse with one candidate, its content one
// text part, finishReason STOP and zero usage; when stream is set, the
// same as the one event of an SSE stream (alt=sse, what Gemini CLI and the
// SDKs ask for; ArrayReply renders a stream without it). now makes its
// responseId.
func AssistantReply(model, text string, stream bool, now time.Time) Reply {
	b := replyBody(model, text, now)
	if !stream {
		return Reply{ContentType: "application/json", Body: b}
	}
	return Reply{ContentType: "text/event-stream", Body: fmt.Appendf(nil, "data: %s\r\n\r\n", b)}
}

// ArrayReply is AssistantReply for a stream asked without alt=sse: a JSON
// array of its one GenerateContentResponse.
func ArrayReply(model, text string, now time.Time) Reply {
	b := append(append([]byte("["), replyBody(model, text, now)...), ']')
	return Reply{ContentType: "application/json", Body: b}
}

// replyBody is the GenerateContentResponse of AssistantReply.
func replyBody(model, text string, now time.Time) []byte {
	b, _ := json.Marshal(replyResponse{
		Candidates: []replyCandidate{{Content: replyContent{Parts: []replyPart{{Text: text}}, Role: "model"},
			FinishReason: "STOP"}},
		ModelVersion: model,
		ResponseID:   fmt.Sprintf("ctxpress_%d", now.UnixNano()),
	})
	return b
}

// errorStatuses are the canonical status names Google's APIs give each
// HTTP status (google.rpc.Code's mapping): a 413 has none of its own, and
// Google refuses an oversized request as INVALID_ARGUMENT; a 502 is
// UNAVAILABLE, as a gateway that cannot reach its backend reports it.
var errorStatuses = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	409: "ABORTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED",
	500: "INTERNAL", 501: "UNIMPLEMENTED", 502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

// errorStatus is the status name of an HTTP status: errorStatuses', else
// INTERNAL for a 5xx and FAILED_PRECONDITION for any other.
func errorStatus(status int) string {
	if s, ok := errorStatuses[status]; ok {
		return s
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// ErrorBody renders one of ctxpress's own errors in Google's shape,
// {"error":{"code":…,"message":"ctxpress: …","status":…}}, so that Gemini
// clients and SDKs read and retry it as they would Google's own.
func ErrorBody(status int, message string) []byte {
	type body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	}
	b, _ := json.Marshal(map[string]body{"error": {Code: status, Message: "ctxpress: " + message, Status: errorStatus(status)}})
	return b
}
