// Package system runs the real ctxpress binary as a user does and checks
// what it does from outside: strict fake upstreams (Responses, Messages,
// chat completions over HTTP and HTTPS), codex- and Claude-shaped agents,
// SIGTERM and SIGKILL, two replicas on one redis-server behind a real
// nginx, and the docker compose files that deploy them.
//
// The tests build the module's root package once per test binary (go
// build into a temporary directory) and drive the process over HTTP and
// signals; they use none of the command's internals. They carry no build
// tag, so `go test ./...` runs them. The replicas tests need nginx and
// redis-server: without them they skip, unless CTXPRESS_REQUIRE_NGINX=1
// and CTXPRESS_REQUIRE_REDIS=1 (CI), where they fail. -short skips every
// test that builds the binary.
//
// The end-to-end suite against a real llama-server is the parent package
// e2e (build tag e2e).
package system
