// Package e2e runs the real ctxpress binary in front of a real llama.cpp
// llama-server serving a real (tiny) model. The tests carry the build tag
// e2e so `go test ./...` stays fast; run them with
//
//	LLAMA_SERVER_BIN=$(.ci/llama-server.sh build) go test -tags e2e -v ./e2e/
//
// The model is ../shared/models/stories260K.gguf (2048-token context), or
// CTXPRESS_MODEL.
package e2e
