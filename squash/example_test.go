package squash_test

import (
	"fmt"
	"strings"

	"github.com/ctxpress/ctxpress/squash"
)

func ExampleSquasher_Apply() {
	var b strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "2024-03-17 16:13:%02d INFO worker: processed job %d\n", i%60, i)
	}
	b.WriteString("2024-03-17 16:18:00 ERROR worker: job 300 failed: disk full\n")
	s := squash.New(squash.Config{})
	r := s.Apply("bash", b.String())
	fmt.Println(r.Shape, r.Squashed)
	fmt.Print(r.Text)
	// Output:
	// log true
	// 2024-03-17 16:13:00 INFO worker: processed job 0
	// 2024-03-17 16:13:01 INFO worker: processed job 1
	// 2024-03-17 16:13:02 INFO worker: processed job 2
	// 2024-03-17 16:13:03 INFO worker: processed job 3
	// 2024-03-17 16:13:04 INFO worker: processed job 4
	// [lines 6-296 omitted]
	// 2024-03-17 16:13:56 INFO worker: processed job 296
	// 2024-03-17 16:13:57 INFO worker: processed job 297
	// 2024-03-17 16:13:58 INFO worker: processed job 298
	// 2024-03-17 16:13:59 INFO worker: processed job 299
	// 2024-03-17 16:18:00 ERROR worker: job 300 failed: disk full
}

func ExampleDetect() {
	fmt.Println(squash.Detect(`{"ok": true}`))
	fmt.Println(squash.Detect("--- FAIL: TestX (0.00s)\nFAIL\n"))
	fmt.Println(squash.Detect("a.go\nb.go\n"))
	// Output:
	// json
	// log
	// generic
}
