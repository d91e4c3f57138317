package main

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// deprecatedKeys are the keys still read but on their way out, by YAML
// path, each with what replaces it. A file that sets one loads, with a
// warning at startup; config.example.yml no longer shows them.
var deprecatedKeys = map[string]string{
	"ui.price_per_million_tokens": "the dashboard's money is the bill at per-model prices (models: NAME: {prices: {input, cached_input, cache_write, output}}, else the built-in list prices); remove the key (until then a negative value still hides the money figures)",
}

// located is a message about one line of the config file.
type located struct {
	Line int
	Msg  string
}

func (l *located) Error() string { return fmt.Sprintf("line %d: %s", l.Line, l.Msg) }

// fileInfo is what a config file said beyond its values.
type fileInfo struct {
	// lines has the line of every key the file sets, by YAML path.
	lines map[string]int
	// deprecated are the deprecated keys it sets, each with what
	// replaces it.
	deprecated []located
}

// decodeConfigFile merges the YAML in data over c. Every key is checked
// against the config before anything is decoded: an unknown key, or a
// value of the wrong kind, is an error that names its section, its line
// and, for a typo, the key meant; a deprecated key is reported in the
// fileInfo. Errors about a line are *located.
func decodeConfigFile(c *config, data []byte) (fileInfo, error) {
	info := fileInfo{lines: map[string]int{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return info, yamlSyntaxError(err)
	}
	// An empty or comment-only file: all defaults.
	if doc.Kind == 0 || doc.Kind == yaml.DocumentNode && len(doc.Content) == 0 {
		return info, nil
	}
	if err := checkNode(&doc, reflect.TypeOf(*c), "", &info); err != nil {
		return info, err
	}
	return info, doc.Decode(c)
}

// yamlLine finds the line in the parser's "yaml: line N: …".
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlSyntaxError is a parser error as a *located when it names a line.
func yamlSyntaxError(err error) error {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	n, _ := strconv.Atoi(m[1])
	return &located{Line: n, Msg: "not valid YAML: " + m[2]}
}

var durationType = reflect.TypeOf(time.Duration(0))

// checkNode checks n against t, the Go type the value at path decodes
// into, and records in info the lines of the keys it sets and the
// deprecated ones among them.
func checkNode(n *yaml.Node, t reflect.Type, path string, info *fileInfo) error {
	for n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		} else {
			n = n.Content[0]
		}
	}
	// "key:" with no value leaves the default alone.
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	bad := func(format string, args ...any) error {
		return &located{Line: n.Line, Msg: path + ": " + fmt.Sprintf(format, args...)}
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			return bad("want a duration such as 30s, 5m or 1h30m, got %s", nodeKind(n))
		}
		// A bare number is refused: yaml.v3 would not take it, and a
		// reader could not tell its unit.
		if _, err := time.ParseDuration(n.Value); err != nil || n.ShortTag() != "!!str" {
			return bad("%q is not a duration; write it with a unit, e.g. 30s, 5m or 1h30m", n.Value)
		}
	case t.Kind() == reflect.Struct:
		return checkSection(n, t, path, info)
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			return bad("want a section of NAME: {…} entries, got %s", nodeKind(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := path + "." + k.Value
			info.lines[p] = k.Line
			if err := checkNode(v, t.Elem(), p, info); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return bad("want a list such as [a, b], got %s", nodeKind(n))
		}
		for _, e := range n.Content {
			if err := checkNode(e, t.Elem(), path, info); err != nil {
				return err
			}
		}
	default:
		if n.Kind != yaml.ScalarNode {
			return bad("want a single value, got %s", nodeKind(n))
		}
		switch t.Kind() {
		case reflect.Int, reflect.Int64:
			if n.ShortTag() != "!!int" {
				return bad("%q is not a whole number", n.Value)
			}
		case reflect.Float64:
			if tag := n.ShortTag(); tag != "!!int" && tag != "!!float" {
				return bad("%q is not a number", n.Value)
			}
		case reflect.Bool:
			if n.ShortTag() != "!!bool" {
				return bad("%q: want true or false", n.Value)
			}
		}
	}
	return nil
}

// checkSection checks a mapping n against the struct t: every key one of
// t's, each value of its field's kind.
func checkSection(n *yaml.Node, t reflect.Type, path string, info *fileInfo) error {
	keys := sectionKeys(t)
	if n.Kind != yaml.MappingNode {
		if path == "" {
			return &located{Line: n.Line, Msg: fmt.Sprintf("want keys such as listen: 127.0.0.1:8484 (config.example.yml lists them), got %s", nodeKind(n))}
		}
		return &located{Line: n.Line, Msg: fmt.Sprintf("%s: want a section of keys (%s), got %s", path, strings.Join(keys, ", "), nodeKind(n))}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "<<" { // a YAML merge: its keys are this section's
			if err := checkNode(v, t, path, info); err != nil {
				return err
			}
			continue
		}
		f, ok := fieldByKey(t, k.Value)
		if !ok {
			return &located{Line: k.Line, Msg: unknownKeyMessage(path, k.Value, keys)}
		}
		p := joinPath(path, k.Value)
		info.lines[p] = k.Line
		if why, ok := deprecatedKeys[p]; ok {
			info.deprecated = append(info.deprecated, located{Line: k.Line, Msg: p + " is deprecated: " + why})
		}
		if err := checkNode(v, f.Type, p, info); err != nil {
			return err
		}
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// nodeKind names what n is, for a message.
func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a section"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

// yamlName is the key of a struct field in the file ("" for none).
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// sectionKeys are the keys of the struct t, in its order.
func sectionKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			keys = append(keys, name)
		}
	}
	return keys
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); yamlName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// configPaths are the YAML paths of every key the config has, a map's
// entries as NAME, in the config's order.
func configPaths() []string {
	var paths []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name := yamlName(f)
			if name == "" {
				continue
			}
			p := joinPath(prefix, name)
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Struct && ft != durationType:
				walk(ft, p)
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				paths = append(paths, p)
				walk(ft.Elem(), p+".NAME")
			default:
				paths = append(paths, p)
			}
		}
	}
	walk(reflect.TypeOf(config{}), "")
	return paths
}

// unknownKeyMessage says that section has no key, and what was likely
// meant: a key of the section a few typos away, else one the key is a
// word of (url: base_url), else the same key in another section, else the
// section's keys.
func unknownKeyMessage(section, key string, keys []string) string {
	msg := fmt.Sprintf("unknown key %q", key)
	if section != "" {
		msg = section + ": " + msg
	}
	if best := closestKey(key, keys); best != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", best)
	}
	if whole := keyWithWord(key, keys); whole != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", whole)
	}
	var elsewhere []string
	for _, p := range configPaths() {
		if strings.HasSuffix(p, "."+key) && !strings.Contains(p, ".NAME.") {
			elsewhere = append(elsewhere, p)
		}
	}
	if len(elsewhere) > 0 {
		return msg + " (did you mean " + orList(elsewhere) + "?)"
	}
	if len(keys) <= 12 {
		return msg + "; its keys are " + strings.Join(keys, ", ")
	}
	return msg + "; config.example.yml lists every key"
}

// orList is "a", "a or b", "a, b or c".
func orList(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// closestKey is the key of keys nearest to key when it is near enough to
// be a typo of it (a third of its letters, dashes and case aside), else "".
func closestKey(key string, keys []string) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "_")) }
	best, bestDist := "", max(1, len(key)/3)+1
	for _, k := range keys {
		if d := editDistance(norm(key), norm(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// keyWithWord is the first of keys that key is a whole word of ("url" of
// "base_url", "window" of "context_window"), else "".
func keyWithWord(key string, keys []string) string {
	for _, k := range keys {
		if strings.HasSuffix(k, "_"+key) || strings.HasPrefix(k, key+"_") || strings.Contains(k, "_"+key+"_") {
			return k
		}
	}
	return ""
}

// editDistance is the number of insertions, deletions, substitutions
// and swaps of two neighbours that make a into b (optimal string
// alignment), in bytes: "modle" is one from "model".
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
