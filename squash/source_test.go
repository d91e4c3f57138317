package squash

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goSource = `package proxy

import (
	"errors"
	"net/http"
)

// ErrClosed is returned after Close.
var ErrClosed = errors.New("proxy: closed")

type Server struct {
	mu      sync.Mutex
	clients map[string]*client
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.clients {
		c.touch()
	}
}
`

const pythonInsideDocstring = `        Parameters
        ----------
        frame : BaseCoordinateFrame
            The frame to transform to.

        Returns
        -------
        coord : SkyCoord
        """
        if self.obstime is None:
            raise ValueError("no obstime")
        frame = self._frame(frame)
        return self._transform(frame, merge=True)

    def _frame(self, frame):
        if isinstance(frame, str):
            frame = frame_transform_graph.lookup_name(frame)
        return frame
`

const jsNumbered = `[File: /workspace/src/App.tsx (31 lines total)]
1|import React, { useState } from 'react'
2|import './App.css'
3|
4|function App() {
5|  const [dark, setDark] = useState(false);
6|  const toggle = () => {
7|    setDark(!dark);
8|  };
9|  return (
10|    <div className="App">
11|      <button onClick={toggle}>Toggle</button>
12|    </div>
13|  )
14|}
15|
16|export default App
`

const pytestFailure = `============================= test session starts ==============================
collected 2 items

test_x.py F.                                                             [100%]

=================================== FAILURES ===================================
____________________________________ test_a ____________________________________

    def test_a():
        x = compute(3)
>       assert x == 4
E       assert 3 == 4

test_x.py:5: AssertionError
=========================== short test summary info ============================
FAILED test_x.py::test_a - assert 3 == 4
========================= 1 failed, 1 passed in 0.02s ==========================
`

const traceback = `Traceback (most recent call last):
  File "reproduce.py", line 12, in <module>
    main()
  File "reproduce.py", line 9, in main
    result = transform(frame)
  File "/testbed/astropy/coordinates/baseframe.py", line 1202, in transform
    return trans(self, new_frame)
  File "/testbed/astropy/coordinates/transformations.py", line 1478, in __call__
    curr_coord = t(curr_coord, curr_toframe)
ValueError: no obstime
`

const unifiedDiff = `diff --git a/proxy/server.go b/proxy/server.go
index 3b18e51..a9d2c3f 100644
--- a/proxy/server.go
+++ b/proxy/server.go
@@ -10,7 +10,9 @@ func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
 	if r.Method != http.MethodPost {
-		http.Error(w, "bad", 400)
+		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
+		return
 	}
-	s.mu.Lock()
+	s.mu.RLock()
+	defer s.mu.RUnlock()
 	for _, c := range s.clients {
`

const pythonWarnings = `/testbed/sympy/core/basic.py:3: DeprecationWarning: Using or importing the ABCs from 'collections' is deprecated
  from collections import Mapping, defaultdict
/testbed/sympy/core/containers.py:271: DeprecationWarning: Using or importing the ABCs from 'collections' is deprecated
  class OrderedSet(collections.MutableSet):
/testbed/sympy/plotting/plot.py:28: DeprecationWarning: Using or importing the ABCs from 'collections' is deprecated
  from collections import Callable
/testbed/sympy/core/function.py:1241: DeprecationWarning: Using or importing the ABCs from 'collections' is deprecated
  if isinstance(v, (collections.Iterable, Tuple)):
CDF Lambda: Lambda(_z, Sum((-1)**_k*(-_k + _z)**5*binomial(5, _k), (_k, 0, floor(_z)))/120)
Result: Sum
`

func TestSourceShape(t *testing.T) {
	tests := []struct {
		rule, in string
		want     Shape
	}{
		{"Go source is source", goSource, ShapeSource},
		{"Python from inside a docstring (a sed -n range) is source", pythonInsideDocstring, ShapeSource},
		{"a numbered listing (OpenHands 12|) is judged without its numbers", jsNumbered, ShapeSource},
		{"a pytest run shows code but is a log", pytestFailure, ShapeLog},
		{"a traceback shows code but is a log", traceback, ShapeLog},
		{"a diff of code is no source", unifiedDiff, ShapeGeneric},
		{"warnings quoting code lines are no source", pythonWarnings, ShapeLog},
		{"JSON is JSON", `{"func": "main", "lines": [1, 2, 3], "if": true}`, ShapeJSON},
		{"a listing of files is no source", strings.Repeat("drwxr-xr-x  5 root root 4096 Jan  1 00:00 pkg\n", 12), ShapeGeneric},
		{"prose is no source", strings.Repeat("The handler returns an error when the request is not a POST.\n", 12), ShapeGeneric},
		{"too few lines to tell", "func a() {\n\treturn\n}\n", ShapeGeneric},
	}
	for _, tt := range tests {
		if got := Detect(tt.in); got != tt.want {
			t.Errorf("%s: Detect = %q, want %q", tt.rule, got, tt.want)
		}
	}
}

// TestSourceShapeOnCorpus checks the source rule on real tool outputs: the
// source an agent gets from tools other than reads, and the test runs,
// diffs, warnings, listings and logs it must not take for source.
func TestSourceShapeOnCorpus(t *testing.T) {
	tests := []struct {
		rule, trace, tool, cmd string // cmd: the start of the command, or for other tools a part of the arguments
		want                   Shape
	}{
		{"python -c printing inspect.getsource", "mini-gemini3pro-sphinx-doc__sphinx-9229.json", "bash",
			"python3 -c 'import sphinx.ext.autodoc; import inspect; print(inspect.getsource", ShapeSource},
		{"nl | grep -A 50 shows a numbered function", "mini-gemini3pro-matplotlib__matplotlib-23299.json", "bash",
			`nl -ba lib/matplotlib/pyplot.py | grep -A 50 "def switch_backend"`, ShapeSource},
		{"a sed -n range of a Python file", "mini-gemini3pro-astropy__astropy-13398.json", "bash",
			"sed -n '774,810p' astropy/coordinates/tests/test_intermediate_transformations.py", ShapeSource},
		{"a decompiled function", "sweagent-ctf-rev-rock.json", "decompile", `"function_name"`, ShapeSource},
		{"pytest failures", "mini-gemini3pro-astropy__astropy-13398.json", "bash",
			"pytest astropy/coordinates/tests/test_intermediate_transformations.py -k test_gcrs_altaz_bothroutes", ShapeLog},
		{"the final git diff", "mini-gemini3pro-astropy__astropy-13398.json", "bash",
			"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", ShapeGeneric},
		{"deprecation warnings quoting code", "mini-gemini3pro-sympy__sympy-13878.json", "bash", "python3 debug_uniformsum_2.py", ShapeLog},
		{"ls -R", "mini-gemini3pro-astropy__astropy-13398.json", "bash", "ls -R astropy/coordinates", ShapeGeneric},
		{"pip install", "sweagent-demo-marshmallow-1867-default.json", "bash", "pip install -e .[dev]", ShapeGeneric},
	}
	outs := corpusToolOutputs(t)
	for _, tt := range tests {
		found := false
		for _, o := range outs {
			var args struct{ Command string }
			_ = json.Unmarshal([]byte(o.args), &args)
			match := strings.HasPrefix(args.Command, tt.cmd) || args.Command == "" && strings.Contains(o.args, tt.cmd)
			if o.file != tt.trace || o.tool != tt.tool || !match || len(o.text) < DefaultMinBytes {
				continue
			}
			found = true
			if got := Detect(o.text); got != tt.want {
				t.Errorf("%s (%s): Detect = %q, want %q", tt.rule, tt.trace, got, tt.want)
			}
		}
		if !found {
			t.Errorf("%s: no output over %d B of %s %q in %s", tt.rule, DefaultMinBytes, tt.tool, tt.cmd, tt.trace)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(corpusDir(t), "logs", "*.log"))
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if Detect(string(data)) == ShapeSource {
			t.Errorf("%s: a log taken for source", filepath.Base(f))
		}
	}
}
