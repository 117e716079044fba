package golangci

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/golangci/plugin-module-register/register"

	"github.com/gpustate/gpustate/analyzers/suite"
)

// TestShippedConfigsOnce checks the configurations the repository ships
// (tools/golangci-lint/golangci.example.yml, and the one docs/EDITORS.md
// shows): under each, every analyzer runs under exactly one enabled
// linter, so that golangci-lint reports each finding once.
//
// golangci-lint v2 (pkg/lint/lintersdb: builder_plugin_module.go and
// Manager.build) puts every module plugin declared under
// linters.settings.custom in its standard group, the default one: a
// declared plugin runs unless linters.default leaves the standard group out
// or linters.disable names it. enabledLinters models exactly that.
func TestShippedConfigsOnce(t *testing.T) {
	example := readFile(t, filepath.Join("..", "..", "tools", "golangci-lint", "golangci.example.yml"))
	editors := yamlBlock(t, readFile(t, filepath.Join("..", "..", "docs", "EDITORS.md")))
	for name, cfg := range map[string]string{"golangci.example.yml": example, "docs/EDITORS.md": editors} {
		runs := make(map[string][]string) // analyzer -> the enabled linters that run it
		for _, l := range enabledLinters(parseYAML(cfg)) {
			newPlugin, err := register.GetPlugin(l)
			if err != nil {
				continue // one of golangci-lint's own linters
			}
			p, err := newPlugin(nil)
			if err != nil {
				t.Fatal(err)
			}
			as, _ := p.BuildAnalyzers()
			for _, a := range as {
				runs[a.Name] = append(runs[a.Name], l)
			}
		}
		for _, a := range suite.Analyzers() {
			if got := runs[a.Name]; len(got) != 1 {
				t.Errorf("%s: analyzer %s runs under the linters %v, want exactly one: each of its findings would be reported %d times",
					name, a.Name, got, len(got))
			}
		}
	}
}

// TestEnabledLinters checks the model of golangci-lint's rules on the
// configurations that showed them: each analyzer declared and not disabled
// runs beside statevet.
func TestEnabledLinters(t *testing.T) {
	for _, tc := range []struct {
		cfg  string
		want []string
	}{
		{"linters:\n  enable: [statevet]\n  settings:\n    custom:\n      statevet: {type: module}\n      stgrowth: {type: module}\n",
			[]string{"statevet", "stgrowth"}},
		{"linters:\n  enable: [statevet]\n  disable:\n    - stgrowth\n  settings:\n    custom:\n      statevet:\n        type: module\n      stgrowth: {type: module}\n",
			[]string{"statevet"}},
		{"linters:\n  default: none # only what is enabled\n  enable: [stgrowth]\n  settings:\n    custom:\n      statevet: {type: module}\n      stgrowth: {type: module}\n",
			[]string{"stgrowth"}},
	} {
		if got := enabledLinters(parseYAML(tc.cfg)); !slices.Equal(got, tc.want) {
			t.Errorf("enabled linters %v, want %v, of\n%s", got, tc.want, tc.cfg)
		}
	}
}

// enabledLinters returns, sorted, the linters a golangci-lint v2
// configuration runs among its module plugins and the linters it enables:
// the declared plugins where the default group is the standard one, plus
// linters.enable, minus linters.disable.
func enabledLinters(cfg yamlDoc) []string {
	on := make(map[string]bool)
	if d := cfg.scalars["linters.default"]; d == "" || d == "standard" || d == "all" {
		for _, name := range cfg.keys["linters.settings.custom"] {
			on[name] = true
		}
	}
	for _, name := range cfg.lists["linters.enable"] {
		on[name] = true
	}
	for _, name := range cfg.lists["linters.disable"] {
		delete(on, name)
	}
	var out []string
	for name := range on {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// yamlDoc is what the test reads of a YAML document: scalars and lists of
// scalars by their dotted path, and the keys of each mapping.
type yamlDoc struct {
	scalars map[string]string
	lists   map[string][]string
	keys    map[string][]string
}

// parseYAML reads the block mappings, block and flow lists of scalars and
// comments of a YAML document; a flow mapping is read as a scalar. It is
// enough for golangci-lint's configuration files, not YAML at large.
func parseYAML(src string) yamlDoc {
	doc := yamlDoc{scalars: map[string]string{}, lists: map[string][]string{}, keys: map[string][]string{}}
	type level struct {
		indent int
		key    string
	}
	var stack []level
	path := func() string {
		var keys []string
		for _, l := range stack {
			keys = append(keys, l.key)
		}
		return strings.Join(keys, ".")
	}
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if item, ok := strings.CutPrefix(trimmed, "- "); ok {
			for len(stack) > 0 && stack[len(stack)-1].indent > indent {
				stack = stack[:len(stack)-1]
			}
			doc.lists[path()] = append(doc.lists[path()], unquote(item))
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		key, value, _ := strings.Cut(trimmed, ":")
		key, value = unquote(key), strings.TrimSpace(value)
		doc.keys[path()] = append(doc.keys[path()], key)
		full := strings.Trim(path()+"."+key, ".")
		switch {
		case value == "":
			stack = append(stack, level{indent, key})
		case strings.HasPrefix(value, "["):
			for _, item := range strings.Split(strings.Trim(value, "[]"), ",") {
				if item = unquote(item); item != "" {
					doc.lists[full] = append(doc.lists[full], item)
				}
			}
		default:
			doc.scalars[full] = unquote(value)
		}
	}
	return doc
}

func unquote(s string) string {
	return strings.Trim(strings.TrimSpace(s), `"'`)
}

// yamlBlock returns the first yaml code block of a Markdown document.
func yamlBlock(t *testing.T, md string) string {
	_, rest, ok := strings.Cut(md, "```yaml\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("no yaml block")
	}
	return block
}

func readFile(t *testing.T, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
