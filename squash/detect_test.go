package squash

import (
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	tests := []struct {
		name, in string
		want     Shape
	}{
		{"object", `  {"a": [1, 2, {"b": null}]}`, ShapeJSON},
		{"array", "[1,2,3]\n", ShapeJSON},
		{"scalar json", `"just a string"`, ShapeJSON},
		{"invalid json", `{"a": 1,}`, ShapeGeneric},
		{"apache-like log line starting with [", "[Sun Dec 04 04:47:44 2005] [notice] ok\n[Sun Dec 04 04:47:45 2005] [notice] ok\n[Sun Dec 04 04:47:46 2005] [notice] ok\n", ShapeLog},
		{"three errors", "a\nerror: x\nb\nerror: y\nwarning: z\n", ShapeLog},
		{"go test transcript", "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\n", ShapeLog},
		{"pytest transcript", "============================= test session starts ==============================\ncollected 3 items\n", ShapeLog},
		{"cargo transcript", "   Compiling widget v0.1.0\n    Finished dev [unoptimized] target(s) in 1.2s\n", ShapeLog},
		{"all-info service log", strings.Repeat("2024-01-01 00:00:00 INFO svc: ok\n", 5), ShapeLog},
		{"prose", "The error handling was fine.\nNothing failed here.\nWe wrote a warning to the docs.\n", ShapeGeneric},
		{"ls", "a.go\nb.go\nc.go\n", ShapeGeneric},
	}
	for _, tt := range tests {
		if got := Detect(tt.in); got != tt.want {
			t.Errorf("%s: Detect = %q, want %q", tt.name, got, tt.want)
		}
	}
}
