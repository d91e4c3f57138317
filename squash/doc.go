// Package squash shrinks one tool result (JSON, a log, or other text) so an
// agent keeps what it needs from it in far fewer tokens.
//
// It is pure and deterministic: the same input always gives the same bytes
// (no time, no randomness, no map order), so a provider's prompt cache stays
// valid from one turn to the next. It knows nothing about conversations;
// callers squash each `role: tool` message on its own.
//
// # When nothing changes
//
// Apply returns its input byte-identical, with Squashed=false, when the tool
// is exempt (read-type tools: agents edit files by exact match against what
// they read), when the output is under the size floor (1500 bytes), or when
// the squashed form would not save at least 10% of tokens. Output is never
// longer than input, and valid UTF-8 in gives valid UTF-8 out: cuts happen on
// rune boundaries (and, in JSON strings, never inside an escape).
//
// # Reads
//
// A shell tool's call whose output is a file's content is a read, and so is
// any output shaped like source code: both come back byte-identical up to
// ReadMaxBytes (64 KiB). ApplyCall sees the call's arguments: the command
// ("command" or "cmd", a string or an argv array such as
// ["bash","-lc","…"]) is read as a shell would, through cd … &&, ;, env
// assignments, env, timeout, nice, sudo, bash -c '…' wrappers, subshells and
// redirections. It is a read when every part that writes output is a read
// command (cat, head, tail, sed -n …p, nl, awk printing lines by NR, bat,
// less, more: Config.ReadCommands) or an echo, and at least one is. In a
// pipeline every stage must be one: cat -n f | sed -n '10,40p' is a read,
// cat f | grep x is a search. sed -i, sed 's/…/', awk '{print $2}' are not
// reads, nor is cat of a here-document. A search (a call that only looks
// and runs grep, rg, ag, ack or git grep, filtered or not) is kept whole up
// to 4 KiB: its lines are the matches the agent asked for.
//
// A read over ReadMaxBytes keeps its first lines (two thirds of the cap)
// and its last (one third), whole lines whatever the file's shape (a JSON
// file is cut by lines too), and one marker where the rest was that names
// the missing lines of the file and a command that prints them, or, when
// the file or its line numbers are not known, the lines of the output:
//
//	[lines 120-3980 of server.go omitted; sed -n '120,3980p' server.go]
//	[lines 120-3980 of this output omitted; tail -n 5000 a.log | sed -n '120,3980p']
//	[lines 120-3980 of this output omitted]
//
// # Shapes
//
// Detect picks one compressor. Valid JSON is json. A text is source when at
// least 8 lines are not blank and 60% of them look like code (ending in one
// of {}[]();:,\, starting with a keyword, a comment, a decorator, an
// assignment, or inside a docstring), 5% start with a keyword, 20% are
// indented (or, with at least one keyword, 80% look like code and half are
// indented: decompiled C), and under 5% are log, traceback or compiler lines and under 20%
// diff lines, with no test-runner line. A text is a log when at least 3 lines
// are errors, warnings or stack frames, when one line is something only a
// test runner or build tool prints (go test, pytest, jest, cargo, npm, maven,
// gradle, make, tsc), or when at least half of its lines carry a level
// field. Everything else is generic.
//
// # Markers
//
// Every omission is marked at the place where the text was, and markers are
// bracketed prose, never shaped like a code comment (a model reads "// ..."
// or "# ..." as code and retries):
//
//	[lines A-B omitted] lines A to B (1-based) of this output dropped; one marker per gap
//	[lines A-B of …]    lines A to B of a read's file (or output) dropped
//	[N more items]      a JSON array element standing for N dropped elements
//	…[N chars]          N characters cut from one line or JSON string
//	line [xN]           this line's template occurs N times in the input
//
// A log's [xN] counts all occurrences of the template, including the ones
// inside the gaps; a generic [xN] counts a run of identical adjacent lines.
// The first gap marker of a shell command's output also says how to get
// lines back ("[lines 11-390 omitted; rerun narrowed (grep -n, sed -n,
// tail) to see them]"); a one-line gap no longer than its marker is kept
// instead.
//
// # JSON
//
// Every key and all structure (brackets, commas, numbers, booleans, null)
// are kept, whitespace between tokens is dropped, and the result is valid
// JSON. Strings of 20 characters or fewer are kept. Longer strings are
// judged by content:
//
//   - a string that mentions an error (error, exception, fail, fatal, panic,
//     crash, denied, refused, timeout, traceback) is kept up to 400 chars;
//   - a high-entropy string is kept up to 256 chars: no whitespace (nor
//     escaped \n \t \r) and either a path or URL separator ('/' or '\') or a
//     Shannon entropy of at least 3.0 bits per byte. Ids, hashes, base64,
//     paths and URLs pass; "aaaa…" and "=====…" do not, and prose fails the
//     whitespace test;
//   - any other (low-entropy) string longer than 64 chars keeps its first 32.
//
// A string of 8 lines or more is a text, not prose: a command's output
// wrapped in JSON (codex ≤ 0.93 sends every shell result as
// {"output": "…", "metadata": {…}}). It is squashed as the same text
// unwrapped would be (a log keeps its errors and summary, generic text its
// head and tail, source and texts under the size floor stay whole) and
// stays a JSON string. A string that already ends in a …[N chars] marker
// is a squash's own output and is kept. A string is never cut by fewer
// than 16 characters: the marker would cost about as much as it saves. Arrays with more than 6 elements keep their
// first 3, every element that looks like an error (an error-like string, an
// object with a non-empty "error"/"errors"/"exception" member, an error
// "status"/"state"/"level"/"result", or "ok"/"success": false), the
// smallest and largest number, and up to 5 outliers whose kind or key set
// differs from the first element's; each gap becomes one "[N more items]"
// string element.
//
// # Logs
//
// Each line is classified by its level field when its header has one:
// upper-case words (INFO, WARN, ERROR, FATAL, SEVERE, CRITICAL, ...) among
// the first 12 header tokens, bracketed or keyed levels in any case
// ("[error]", level=warn, "level":"error"), column-aligned capitalised ones
// ("Info   "), and one-letter levels after numeric columns (logcat
// "1702  2395 E Tag:") or in logcat-brief and glog prefixes. The scan stops
// at the first header token ending in ':', so a level word inside a message
// is just a word; the word "error" alone never makes an error (Zookeeper
// prints it in hundreds of INFO lines). Lines without a level are classified
// by shape: "error:", "panic:", "Traceback", "Caused by:", "ValueError: x",
// compiler diagnostics "file.go:3:5: msg", failing tests ("--- FAIL:",
// "FAILED a.py::t", jest "✕"), stack frames ("at a.B(B.java:1)",
// `File "x", line 1`, Go "\tx.go:12"), and run summaries ("3 failed, 10
// passed", "BUILD FAILED", "error: could not compile", "test result:").
//
// Each error and warning line is reduced to a template (numbers, hex, ids,
// month names and absolute paths replaced), and repeats of a template
// collapse into its first line plus a count. Kept whatever the size: one
// line of every distinct error template, every failing-test line and
// compiler diagnostic verbatim, every distinct summary line, and the 10
// rarest warning templates ("aggressive on green, faithful on red"). Kept
// while the output fits the byte budget (3000 by default, and at least half
// a budget beyond the required lines): the first line and last 2 lines;
// then failure regions, which may use half a budget more; then stack frames
// and indented continuation lines next to other kept errors (12 after, 8
// before), the first and last 5 lines, then 2 lines of context around kept
// errors; context goes first when the output grows too big. Kept lines stay
// in their original order, and lines longer than 600 bytes lose their
// middle.
//
// A failure region is what explains one failure: a pytest failure block
// (from its "____ test_x ____" header to the next header or section) or a
// traceback (its frames, their code and its error line). Kept in this
// order: what failed (headers, error lines, pytest's "> code", "E   …" and
// location lines); the project's code under its frames (the failing test's
// body, a frame line with its code as one unit, innermost first, each frame
// once however many chained tracebacks repeat it); then library frames
// (site-packages, /lib/python…, node_modules, the Go and Rust toolchains)
// the same way. Python 3.11 caret lines are dropped. A failure that repeats
// (a parametrized test, the same error through the same innermost frame)
// shows its header and error lines only.
//
// # Generic text
//
// The lines that look important (errors, failing tests and summaries), a
// diff's file and hunk headers and a recursive listing's directory headers,
// the first and last 10 lines, then warnings are kept within the byte
// budget; runs of identical adjacent lines collapse into one line with a
// count; a single huge line keeps its head and tail.
package squash
