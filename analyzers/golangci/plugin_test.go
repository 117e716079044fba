package golangci

import (
	"testing"

	"github.com/golangci/plugin-module-register/register"

	"github.com/gpustate/gpustate/analyzers/suite"
)

// TestPlugins checks that every analyzer is a plugin of its own name, that
// statevet runs them all, with type information, and that settings the
// analyzers do not take are refused.
func TestPlugins(t *testing.T) {
	all := suite.Analyzers()
	want := map[string][]string{AllName: nil}
	for _, a := range all {
		want[AllName] = append(want[AllName], a.Name)
		want[a.Name] = []string{a.Name}
	}
	for name, analyzers := range want {
		newPlugin, err := register.GetPlugin(name)
		if err != nil {
			t.Errorf("plugin %s: %v", name, err)
			continue
		}
		for _, settings := range []any{nil, map[string]any{}} {
			p, err := newPlugin(settings)
			if err != nil {
				t.Errorf("plugin %s with settings %v: %v", name, settings, err)
				continue
			}
			got, err := p.BuildAnalyzers()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, a := range got {
				names = append(names, a.Name)
			}
			if len(names) != len(analyzers) {
				t.Errorf("plugin %s runs %v, want %v", name, names, analyzers)
			}
			for i := range min(len(names), len(analyzers)) {
				if names[i] != analyzers[i] {
					t.Errorf("plugin %s runs %v, want %v", name, names, analyzers)
					break
				}
			}
			if m := p.GetLoadMode(); m != register.LoadModeTypesInfo {
				t.Errorf("plugin %s load mode %q, want %q", name, m, register.LoadModeTypesInfo)
			}
		}
		if _, err := newPlugin(map[string]any{"strict": true}); err == nil {
			t.Errorf("plugin %s accepted a setting it does not have", name)
		}
	}
}
