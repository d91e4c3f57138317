// Package gemini is the wire adapter for Google's Gemini API
// (POST /v1beta/models/{model}:generateContent and :streamGenerateContent,
// what Gemini CLI, pi on Google's models and the genai SDKs speak): Format
// reads a generateContent request into the neutral conversation and writes
// the core's edits back in place; usage from an answer and from both of
// its stream shapes (SSE with ?alt=sse, a streamed JSON array without),
// ctxpress's own replies and errors in Google's shape, the summary call
// in this format, and the retrieval tool as a function declaration.
//
// The model is in the path, not in the body: Format.Model carries it into
// the conversation, and StreamAsks reads the method from the path.
//
// Thought signatures (thoughtSignature on a part) are the model's
// encrypted thoughts: never edited, never moved off the part they are on.
// A history that carries one is Bound, as Anthropic's thinking is: every
// rewrite is sticky, and where a summary or cut changes what came before a
// kept signed part, LeaveOut removes its thought parts whole and gives its
// other signed parts the dummy signature Google documents for history the
// model did not produce over this prefix (see signature.go).
package gemini
