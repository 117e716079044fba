package sarif

import (
	"encoding/json"
	"strings"
	"testing"
)

// valid is a small log with every part statevet writes.
const valid = `{
  "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
  "version": "2.1.0",
  "runs": [{
    "tool": {"driver": {"name": "t", "rules": [{"id": "a", "shortDescription": {"text": "x"}, "defaultConfiguration": {"level": "error"}}]}},
    "originalUriBaseIds": {"%SRCROOT%": {"uri": "file:///src/"}},
    "columnKind": "utf16CodeUnits",
    "results": [{
      "ruleId": "a", "ruleIndex": 0, "level": "error", "message": {"text": "m"},
      "locations": [{"physicalLocation": {"artifactLocation": {"uri": "a.go", "uriBaseId": "%SRCROOT%"}, "region": {"startLine": 3, "startColumn": 2, "endLine": 3, "endColumn": 5}}}],
      "relatedLocations": [{"id": 1, "message": {"text": "r"}, "physicalLocation": {"artifactLocation": {"uri": "a.go"}, "region": {"startLine": 4}}}],
      "fixes": [{"description": {"text": "f"}, "artifactChanges": [{"artifactLocation": {"uri": "a.go"}, "replacements": [{"deletedRegion": {"byteOffset": 0, "byteLength": 1}, "insertedContent": {"text": "y"}}]}]}]
    }]
  }]
}`

func TestValidate(t *testing.T) {
	if err := Validate([]byte(valid)); err != nil {
		t.Fatalf("a valid log: %v", err)
	}
	for _, tc := range []struct{ old, new, want string }{
		{`"version": "2.1.0",`, ``, `lacks required property "version"`},
		{`"version": "2.1.0"`, `"version": "2.0.0"`, `want one of 2.1.0`},
		{`"name": "t", `, ``, `toolComponent lacks required property "name"`},
		{`"ruleIndex": 0`, `"ruleIndex": 1`, `ruleIndex 1, but the driver has 1 rules`},
		{`"ruleId": "a"`, `"ruleId": "b"`, `names rule a, not the ruleId b`},
		{`"ruleIndex": 0`, `"ruleIndex": -2`, `below its minimum -1`},
		{`"level": "error", "message"`, `"level": "fatal", "message"`, `want one of none|note|warning|error`},
		{`"message": {"text": "m"}`, `"message": {}`, `message needs one of text, id`},
		{`"startLine": 3, "startColumn": 2`, `"startLine": 0, "startColumn": 2`, `startLine is 0, below its minimum 1`},
		{`"endLine": 3, "endColumn": 5`, `"endLine": 2, "endColumn": 5`, `region ends on line 2`},
		{`"endColumn": 5`, `"endColumn": 1`, `region ends at column 1`},
		{`"startLine": 3,`, `"startline": 3,`, `region has no property "startline"`},
		{`"startLine": 4}`, `"startLine": "4"}`, `want an integer`},
		{`"replacements": [{"deletedRegion": {"byteOffset": 0, "byteLength": 1}, "insertedContent": {"text": "y"}}]`, `"replacements": []`, `has 0 items, fewer than 1`},
		{`"physicalLocation": {"artifactLocation": {"uri": "a.go"}, "region": {"startLine": 4}}`, `"physicalLocation": {"region": {"startLine": 4}}`, `needs one of address, artifactLocation`},
		{`"id": 1, `, `"id": 1, "extra": true, `, `location has no property "extra"`},
	} {
		bad := strings.Replace(valid, tc.old, tc.new, 1)
		if bad == valid {
			t.Fatalf("%q is not in the valid log", tc.old)
		}
		err := Validate([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("replacing %s with %s: error %v, want %q", tc.old, tc.new, err, tc.want)
		}
	}
	if err := Validate([]byte("{")); err == nil {
		t.Error("Validate accepted a log that is not JSON")
	}
}

// TestTypes checks that the Go types marshal into a valid log.
func TestTypes(t *testing.T) {
	zero, one := 0, 1
	log := Log{Schema: Schema, Version: Version, Runs: []Run{{
		Tool: Tool{Driver: Driver{Name: "t", Rules: []Rule{{ID: "a", DefaultConfiguration: &Configuration{Level: "error"}}}}},
		Results: []Result{{RuleID: "a", Level: "error", Message: Message{Text: "m"},
			Locations:        []Location{{PhysicalLocation: PhysicalLocation{ArtifactLocation: ArtifactLocation{URI: "a.go"}, Region: &Region{StartLine: 1, StartColumn: 1}}}},
			RelatedLocations: []Location{{ID: &one, Message: &Message{Text: "r"}, PhysicalLocation: PhysicalLocation{ArtifactLocation: ArtifactLocation{URI: "a.go"}}}},
			Fixes: []Fix{{Description: Message{Text: "f"}, ArtifactChanges: []ArtifactChange{{ArtifactLocation: ArtifactLocation{URI: "a.go"},
				Replacements: []Replacement{{DeletedRegion: Region{ByteOffset: &zero, ByteLength: &zero}, InsertedContent: &Content{Text: "x"}}}}}}},
		}},
	}}}
	data, err := json.Marshal(log)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(data); err != nil {
		t.Errorf("%v\n%s", err, data)
	}
}
