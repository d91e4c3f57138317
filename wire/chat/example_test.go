package chat_test

import (
	"fmt"

	"github.com/ctxpress/ctxpress/wire/chat"
)

func ExampleEnsureStreamUsage() {
	out, injected := chat.EnsureStreamUsage([]byte(`{"model":"gpt-4o","stream":true,"messages":[]}`))
	fmt.Println(injected, string(out))
	// Output: true {"model":"gpt-4o","stream":true,"messages":[],"stream_options":{"include_usage":true}}
}
