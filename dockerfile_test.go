package main

// There is no Docker engine where these tests run: they read the
// Dockerfile and .dockerignore as the builder does, check what the image
// needs, and run the build stage's commands for real on the context
// .dockerignore leaves.

import (
	"encoding/json"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerInstr is one Dockerfile instruction.
type dockerInstr struct {
	cmd   string            // FROM, RUN, COPY, … upper-cased
	flags map[string]string // --from=build is "from": "build"
	args  string            // the rest, continuation lines joined
}

// execForm is the instruction's JSON array form (ENTRYPOINT ["a", "b"]), or
// nil when it is in shell form.
func (in dockerInstr) execForm(t *testing.T) []string {
	t.Helper()
	if !strings.HasPrefix(in.args, "[") {
		return nil
	}
	var argv []string
	if err := json.Unmarshal([]byte(in.args), &argv); err != nil {
		t.Fatalf("%s %s: %v", in.cmd, in.args, err)
	}
	return argv
}

type dockerStage struct {
	base, name string
	instrs     []dockerInstr
}

// all is the stage's instructions of one kind, in order.
func (s dockerStage) all(cmd string) []dockerInstr {
	var out []dockerInstr
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// one is the stage's only instruction of a kind; none or several fail.
func (s dockerStage) one(t *testing.T, cmd string) dockerInstr {
	t.Helper()
	got := s.all(cmd)
	if len(got) != 1 {
		t.Fatalf("stage %q: %d %s instructions, want 1", s.name, len(got), cmd)
	}
	return got[0]
}

// env is the stage's ENV, in either of its two forms.
func (s dockerStage) env(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, in := range s.all("ENV") {
		fields := strings.Fields(in.args)
		if len(fields) > 0 && !strings.Contains(fields[0], "=") {
			env[fields[0]] = strings.TrimSpace(strings.TrimPrefix(in.args, fields[0]))
			continue
		}
		for _, f := range fields {
			k, v, _ := strings.Cut(f, "=")
			env[k] = strings.Trim(v, `"`)
		}
	}
	return env
}

// parseDockerfile reads name into stages: comments dropped, continuation
// lines joined, leading --flags split off.
func parseDockerfile(t *testing.T, name string) []dockerStage {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var stages []dockerStage
	var logical string
	for line := range strings.SplitSeq(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if more, ok := strings.CutSuffix(trimmed, `\`); ok {
			logical += more + " "
			continue
		}
		logical += trimmed
		cmd, rest, _ := strings.Cut(logical, " ")
		logical = ""
		in := dockerInstr{cmd: strings.ToUpper(cmd), flags: map[string]string{}}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			flag, after, _ := strings.Cut(rest, " ")
			k, v, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
			in.flags[k] = v
			rest = strings.TrimSpace(after)
		}
		in.args = rest
		if in.cmd == "FROM" {
			f := strings.Fields(rest)
			st := dockerStage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" {
				continue // a global ARG, before the first FROM
			}
			t.Fatalf("%s: %s before FROM", name, in.cmd)
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
	}
	if logical != "" {
		t.Fatalf("%s: ends inside a continued line", name)
	}
	if len(stages) == 0 {
		t.Fatalf("%s: no FROM", name)
	}
	return stages
}

// dockerImage is the Dockerfile's build stage and final stage.
type dockerImage struct {
	build, final dockerStage
}

func readDockerImage(t *testing.T) dockerImage {
	t.Helper()
	stages := parseDockerfile(t, "Dockerfile")
	final := stages[len(stages)-1]
	var build dockerStage
	for _, in := range final.all("COPY") {
		for _, st := range stages {
			if st.name != "" && st.name == in.flags["from"] {
				build = st
			}
		}
	}
	if build.name == "" {
		t.Fatal("the final stage copies nothing from a build stage")
	}
	return dockerImage{build: build, final: final}
}

// copies is the final stage's COPY --from=<build stage>: destination to
// source.
func (img dockerImage) copies(t *testing.T) map[string]dockerInstr {
	t.Helper()
	out := map[string]dockerInstr{}
	for _, in := range img.final.all("COPY") {
		if in.flags["from"] != img.build.name {
			continue
		}
		f := strings.Fields(in.args)
		if len(f) != 2 {
			t.Fatalf("COPY %s: want one source and one destination", in.args)
		}
		out[path.Clean(f[1])] = in
	}
	return out
}

// nonrootUID is distroless's nonroot user.
const nonrootUID = "65532"

// The final image runs the binary as nonroot, keeps its db in a directory
// that user owns, checks its health with the binary itself, and listens
// where the published port reaches it.
func TestDockerfileFinalStage(t *testing.T) {
	img := readDockerImage(t)
	final := img.final

	user := final.one(t, "USER").args
	if uid, _, _ := strings.Cut(user, ":"); uid != nonrootUID {
		t.Fatalf("USER %s: want distroless's nonroot, %s", user, nonrootUID)
	}

	entry := final.one(t, "ENTRYPOINT").execForm(t)
	if len(entry) != 1 {
		t.Fatalf("ENTRYPOINT %v: want the binary alone, in exec form (distroless has no shell)", entry)
	}
	bin := entry[0]
	copies := img.copies(t)
	if _, ok := copies[bin]; !ok {
		t.Fatalf("ENTRYPOINT %s: no COPY --from=%s puts the binary there", bin, img.build.name)
	}
	if cmd := final.one(t, "CMD").execForm(t); len(cmd) != 1 || cmd[0] != "serve" {
		t.Fatalf("CMD %v: want [\"serve\"]", cmd)
	}

	hc := final.one(t, "HEALTHCHECK")
	kind, argv, _ := strings.Cut(hc.args, " ")
	check := dockerInstr{cmd: kind, args: strings.TrimSpace(argv)}.execForm(t)
	if kind != "CMD" || len(check) < 2 || check[0] != bin || check[1] != "healthcheck" {
		t.Fatalf("HEALTHCHECK %s: want CMD [%q, \"healthcheck\"] in exec form", hc.args, bin)
	}
	if hc.flags["timeout"] == "" || hc.flags["interval"] == "" {
		t.Errorf("HEALTHCHECK without --interval and --timeout: %v", hc.flags)
	}

	env := final.env(t)
	db := env["CTXPRESS_DB"]
	if !path.IsAbs(db) {
		t.Fatalf("ENV CTXPRESS_DB=%q: want an absolute path in the data directory", db)
	}
	dataDir := path.Dir(db)
	// The directory comes from the build stage with --chown: WORKDIR or
	// the volume would make it root's, and the db would not open.
	data, ok := copies[dataDir]
	if !ok {
		t.Fatalf("no COPY --from=%s makes %s, the db's directory", img.build.name, dataDir)
	}
	if owner, _, _ := strings.Cut(data.flags["chown"], ":"); owner != nonrootUID {
		t.Fatalf("COPY %s: --chown=%q, want %s (the USER)", data.args, data.flags["chown"], nonrootUID)
	}
	for _, in := range final.instrs {
		if in.cmd == "COPY" && in.args == data.args {
			break
		}
		if in.cmd == "WORKDIR" && path.Clean(in.args) == dataDir {
			t.Fatalf("WORKDIR %s before the COPY that makes it: the legacy builder creates it root-owned", dataDir)
		}
	}

	host, port, err := net.SplitHostPort(env["CTXPRESS_LISTEN"])
	if err != nil || net.ParseIP(host) == nil || !net.ParseIP(host).IsUnspecified() {
		t.Fatalf("ENV CTXPRESS_LISTEN=%q: a container listens on every interface, or a published port reaches nothing", env["CTXPRESS_LISTEN"])
	}
	if expose := strings.TrimSuffix(final.one(t, "EXPOSE").args, "/tcp"); expose != port {
		t.Fatalf("EXPOSE %s, but ctxpress listens on %s", expose, port)
	}

	// `docker run -p 8484:8484` with nothing else is open to the network:
	// the image alone does not silence the warning.
	listen, _ := net.ResolveTCPAddr("tcp", env["CTXPRESS_LISTEN"])
	if exposureWarning(listen, 0, env[envPublishedAddr]) == "" {
		t.Fatalf("the image's own environment silences the security warning (%s=%q)", envPublishedAddr, env[envPublishedAddr])
	}
}

// dockerignore is .dockerignore's patterns, matched as Docker matches them
// (moby/patternmatcher): from the context's root, * within one directory,
// ** across any, a pattern that matches a directory excluding what is in
// it, the last matching pattern deciding.
type dockerignore []struct {
	re      *regexp.Regexp
	exclude bool
}

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	data, err := os.ReadFile(".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var d dockerignore
	for line := range strings.SplitSeq(string(data), "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		exclude := true
		if rest, ok := strings.CutPrefix(p, "!"); ok {
			p, exclude = strings.TrimSpace(rest), false
		}
		p = strings.TrimPrefix(path.Clean(p), "/")
		d = append(d, struct {
			re      *regexp.Regexp
			exclude bool
		}{regexp.MustCompile(dockerPatternRegexp(p)), exclude})
	}
	return d
}

// dockerPatternRegexp turns one cleaned .dockerignore pattern into the
// regexp Docker matches paths with.
func dockerPatternRegexp(p string) string {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '*' && i+1 < len(p) && p[i+1] == '*':
			i++
			if i+1 < len(p) && p[i+1] == '/' {
				i++
			}
			if i+1 == len(p) {
				b.WriteString(".*")
			} else {
				b.WriteString("(.*/)?")
			}
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return b.String()
}

// excludes reports whether Docker leaves rel (slash-separated, from the
// context's root) out of the context.
func (d dockerignore) excludes(rel string) bool {
	parts := strings.Split(rel, "/")
	excluded := false
	for _, p := range d {
		for i := range parts {
			if p.re.MatchString(strings.Join(parts[:i+1], "/")) {
				excluded = p.exclude
				break
			}
		}
	}
	return excluded
}

func TestDockerPatternRegexp(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		match         bool
	}{
		{"*.db", "ctxpress.db", true},
		{"*.db", "state/ctxpress.db", false}, // unlike .gitignore
		{"**/*.db", "state/ctxpress.db", true},
		{"**/*.db", "ctxpress.db", true},
		{".git", ".git", true},
		{"docs", "docs", true},
		{"a?c", "abc", true},
		{"a?c", "a/c", false},
	} {
		if got := regexp.MustCompile(dockerPatternRegexp(tc.pattern)).MatchString(tc.path); got != tc.match {
			t.Errorf("%q on %q: %v, want %v", tc.pattern, tc.path, got, tc.match)
		}
	}
}

// What must stay out of the build context: the git directory (a file in a
// worktree), local dbs, test and build outputs, and everything .gitignore
// ignores. What must stay in: every file the binary is built from.
func TestDockerignore(t *testing.T) {
	ignore := readDockerignore(t)
	for _, p := range []string{
		".git", ".git/HEAD", "ctxpress.db", "state/testdata/old.db", "ctxpress.db-journal",
		"x/ctxpress.db-journal", "proxy/proxy.test", "cpu.prof", "artifacts/dashboard.png", "ctxpress",
		".worktrees/h-x/main.go", "cover.out", ".env",
	} {
		if !ignore.excludes(p) {
			t.Errorf(".dockerignore lets %s into the build context", p)
		}
	}
	gitignore, err := os.ReadFile(".gitignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range gitignoreSamples(string(gitignore)) {
		if !ignore.excludes(p) {
			t.Errorf(".gitignore ignores %s but .dockerignore lets it into the build context", p)
		}
	}
	// Every file of every package of this module the binary is built from.
	out, err := exec.Command("go", "list", "-deps", "-f",
		`{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	wd, _ := os.Getwd()
	needed := []string{"go.mod", "go.sum"}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if rel, err := filepath.Rel(wd, line); err == nil && !strings.HasPrefix(rel, "..") {
			needed = append(needed, filepath.ToSlash(rel))
		}
	}
	if len(needed) < 20 {
		t.Fatalf("go list found %d files of this module: %v", len(needed), needed)
	}
	for _, p := range needed {
		if ignore.excludes(p) {
			t.Errorf(".dockerignore leaves out %s, which the binary is built from", p)
		}
	}
}

// gitignoreSamples is, for each .gitignore pattern, paths it ignores: at
// the root and, for an unanchored pattern, deeper too.
func gitignoreSamples(gitignore string) []string {
	var out []string
	for line := range strings.SplitSeq(gitignore, "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") || strings.HasPrefix(p, "!") {
			continue
		}
		dir := strings.HasSuffix(p, "/")
		p = strings.TrimSuffix(p, "/")
		anchored := strings.HasPrefix(p, "/") || strings.Contains(p, "/")
		p = strings.ReplaceAll(strings.TrimPrefix(p, "/"), "*", "x")
		samples := []string{p}
		if !anchored {
			samples = append(samples, "some/dir/"+p)
		}
		for _, s := range samples {
			if dir {
				s += "/file"
			}
			out = append(out, s)
		}
	}
	return out
}

// copyContext copies the files of src that .dockerignore leaves in the
// context to dst: what `COPY . .` sees.
func copyContext(t *testing.T, ignore dockerignore, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		if ignore.excludes(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
