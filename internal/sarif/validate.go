package sarif

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// kind is the JSON type a property must have: a primitive ("string",
// "integer", "boolean", "any"), "enum:a|b" (a string from the list),
// "object:def", "array:def" or "map:def" (an object whose values are def),
// where def is a definition name or a primitive.
type kind string

// def is the part of a SARIF 2.1.0 schema definition that Validate checks:
// every property the schema allows (it sets additionalProperties false on
// each), the required ones, the lower bounds of integers, the minimum
// lengths of arrays, and anyOf-required groups.
type def struct {
	props    map[string]kind
	required []string
	anyOf    [][]string     // at least one of each group
	minimum  map[string]int // integer properties with a lower bound
	minItems map[string]int // array properties with a minimum length
}

// schema is the subset of the SARIF 2.1.0 schema (sarif-schema-2.1.0.json)
// that covers what statevet and golangci-lint write: the definitions below
// are complete (every property the schema lists), other definitions
// reachable from them are accepted as any JSON value of the right shape.
var schema = map[string]def{
	"sarifLog": {
		props: map[string]kind{"$schema": "string", "version": "enum:2.1.0", "runs": "array:run",
			"inlineExternalProperties": "array:any", "properties": "object:any"},
		required: []string{"version", "runs"},
	},
	"run": {
		props: map[string]kind{"tool": "object:tool", "invocations": "array:any", "conversion": "object:any",
			"language": "string", "versionControlProvenance": "array:any", "originalUriBaseIds": "map:artifactLocation",
			"artifacts": "array:any", "logicalLocations": "array:any", "graphs": "array:any", "results": "array:result",
			"automationDetails": "object:any", "runAggregates": "array:any", "baselineGuid": "string",
			"redactionTokens": "array:string", "defaultEncoding": "string", "defaultSourceLanguage": "string",
			"newlineSequences": "array:string", "columnKind": "enum:utf16CodeUnits|unicodeCodePoints",
			"externalPropertyFileReferences": "object:any", "threadFlowLocations": "array:any", "taxonomies": "array:any",
			"addresses": "array:any", "translations": "array:any", "policies": "array:any", "webRequests": "array:any",
			"webResponses": "array:any", "specialLocations": "object:any", "properties": "object:any"},
		required: []string{"tool"},
	},
	"tool": {
		props:    map[string]kind{"driver": "object:toolComponent", "extensions": "array:toolComponent", "properties": "object:any"},
		required: []string{"driver"},
	},
	"toolComponent": {
		props: map[string]kind{"guid": "string", "name": "string", "organization": "string", "product": "string",
			"productSuite": "string", "shortDescription": "object:multiformatMessageString",
			"fullDescription": "object:multiformatMessageString", "fullName": "string", "version": "string",
			"semanticVersion": "string", "dottedQuadFileVersion": "string", "releaseDateUtc": "string",
			"downloadUri": "string", "informationUri": "string", "globalMessageStrings": "map:multiformatMessageString",
			"notifications": "array:reportingDescriptor", "rules": "array:reportingDescriptor",
			"taxa": "array:reportingDescriptor", "locations": "array:artifactLocation", "language": "string",
			"contents": "array:string", "isComprehensive": "boolean", "localizedDataSemanticVersion": "string",
			"minimumRequiredLocalizedDataSemanticVersion": "string", "associatedComponent": "object:any",
			"translationMetadata": "object:any", "supportedTaxonomies": "array:any", "properties": "object:any"},
		required: []string{"name"},
	},
	"reportingDescriptor": {
		props: map[string]kind{"id": "string", "deprecatedIds": "array:string", "guid": "string",
			"deprecatedGuids": "array:string", "name": "string", "deprecatedNames": "array:string",
			"shortDescription": "object:multiformatMessageString", "fullDescription": "object:multiformatMessageString",
			"messageStrings": "map:multiformatMessageString", "defaultConfiguration": "object:reportingConfiguration",
			"helpUri": "string", "help": "object:multiformatMessageString", "relationships": "array:any",
			"properties": "object:any"},
		required: []string{"id"},
	},
	"multiformatMessageString": {
		props:    map[string]kind{"text": "string", "markdown": "string", "properties": "object:any"},
		required: []string{"text"},
	},
	"reportingConfiguration": {
		props: map[string]kind{"enabled": "boolean", "level": "enum:none|note|warning|error", "rank": "any",
			"parameters": "object:any", "properties": "object:any"},
	},
	"result": {
		props: map[string]kind{"ruleId": "string", "ruleIndex": "integer", "rule": "object:any",
			"kind": "enum:notApplicable|pass|fail|review|open|informational", "level": "enum:none|note|warning|error",
			"message": "object:message", "analysisTarget": "object:artifactLocation", "locations": "array:location",
			"guid": "string", "correlationGuid": "string", "occurrenceCount": "integer",
			"partialFingerprints": "map:string", "fingerprints": "map:string", "stacks": "array:any",
			"codeFlows": "array:any", "graphs": "array:any", "graphTraversals": "array:any",
			"relatedLocations": "array:location", "suppressions": "array:any",
			"baselineState": "enum:new|unchanged|updated|absent", "rank": "any", "attachments": "array:any",
			"hostedViewerUri": "string", "workItemUris": "array:string", "provenance": "object:any",
			"fixes": "array:fix", "taxa": "array:any", "webRequest": "object:any", "webResponse": "object:any",
			"properties": "object:any"},
		required: []string{"message"},
		minimum:  map[string]int{"ruleIndex": -1, "occurrenceCount": 1},
	},
	"message": {
		props: map[string]kind{"text": "string", "markdown": "string", "id": "string", "arguments": "array:string",
			"properties": "object:any"},
		anyOf: [][]string{{"text", "id"}},
	},
	"location": {
		props: map[string]kind{"id": "integer", "physicalLocation": "object:physicalLocation",
			"logicalLocations": "array:any", "message": "object:message", "annotations": "array:region",
			"relationships": "array:any", "properties": "object:any"},
		minimum: map[string]int{"id": -1},
	},
	"physicalLocation": {
		props: map[string]kind{"address": "object:any", "artifactLocation": "object:artifactLocation",
			"region": "object:region", "contextRegion": "object:region", "properties": "object:any"},
		anyOf: [][]string{{"address", "artifactLocation"}},
	},
	"artifactLocation": {
		props: map[string]kind{"uri": "string", "uriBaseId": "string", "index": "integer",
			"description": "object:message", "properties": "object:any"},
		minimum: map[string]int{"index": -1},
	},
	"region": {
		props: map[string]kind{"startLine": "integer", "startColumn": "integer", "endLine": "integer",
			"endColumn": "integer", "charOffset": "integer", "charLength": "integer", "byteOffset": "integer",
			"byteLength": "integer", "snippet": "object:any", "message": "object:message",
			"sourceLanguage": "string", "properties": "object:any"},
		minimum: map[string]int{"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1,
			"charOffset": -1, "charLength": 0, "byteOffset": -1, "byteLength": 0},
	},
	"fix": {
		props:    map[string]kind{"description": "object:message", "artifactChanges": "array:artifactChange", "properties": "object:any"},
		required: []string{"artifactChanges"},
		minItems: map[string]int{"artifactChanges": 1},
	},
	"artifactChange": {
		props: map[string]kind{"artifactLocation": "object:artifactLocation", "replacements": "array:replacement",
			"properties": "object:any"},
		required: []string{"artifactLocation", "replacements"},
		minItems: map[string]int{"replacements": 1},
	},
	"replacement": {
		props: map[string]kind{"deletedRegion": "object:region", "insertedContent": "object:artifactContent",
			"properties": "object:any"},
		required: []string{"deletedRegion"},
	},
	"artifactContent": {
		props: map[string]kind{"text": "string", "binary": "string", "rendered": "object:multiformatMessageString",
			"properties": "object:any"},
	},
}

// Validate checks that data is a SARIF 2.1.0 log: the structure of the
// schema's definitions for everything statevet writes (required
// properties, no unknown ones, types, enums, bounds), and the rules the
// specification adds: a result's ruleIndex names a rule whose id is the
// result's ruleId, a region ends no earlier than it starts, and the ids of
// a result's related locations are distinct. It returns every violation
// found, each with its JSON path.
func Validate(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	var errs []error
	check(&errs, "$", v, "object:sarifLog")
	if len(errs) == 0 {
		crossCheck(&errs, v)
	}
	return errors.Join(errs...)
}

func check(errs *[]error, path string, v any, k kind) {
	fail := func(format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	typ, arg, _ := strings.Cut(string(k), ":")
	switch typ {
	case "any":
	case "string":
		if _, ok := v.(string); !ok {
			fail("want a string, have %T", v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			fail("want a boolean, have %T", v)
		}
	case "integer":
		n, ok := v.(json.Number)
		if _, err := n.Int64(); !ok || err != nil {
			fail("want an integer, have %v", v)
		}
	case "enum":
		s, ok := v.(string)
		if !ok || !slices.Contains(strings.Split(arg, "|"), s) {
			fail("want one of %s, have %v", arg, v)
		}
	case "array":
		list, ok := v.([]any)
		if !ok {
			fail("want an array, have %T", v)
			return
		}
		for i, e := range list {
			check(errs, fmt.Sprintf("%s[%d]", path, i), e, elem(arg))
		}
	case "map":
		m, ok := v.(map[string]any)
		if !ok {
			fail("want an object, have %T", v)
			return
		}
		for _, key := range sortedKeys(m) {
			check(errs, path+"."+key, m[key], elem(arg))
		}
	case "object":
		checkObject(errs, path, v, arg)
	default:
		fail("bad kind %q in the schema subset", k)
	}
}

// checkObject checks an object against the schema subset's definition arg:
// required properties, anyOf groups, no unknown properties, and each
// property's own kind and bounds.
func checkObject(errs *[]error, path string, v any, arg string) {
	fail := func(format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	m, ok := v.(map[string]any)
	if !ok {
		fail("want an object, have %T", v)
		return
	}
	d, known := schema[arg]
	if !known {
		return // "any"
	}
	for _, r := range d.required {
		if _, ok := m[r]; !ok {
			fail("%s lacks required property %q", arg, r)
		}
	}
	for _, group := range d.anyOf {
		if !slices.ContainsFunc(group, func(p string) bool { _, ok := m[p]; return ok }) {
			fail("%s needs one of %s", arg, strings.Join(group, ", "))
		}
	}
	for _, key := range sortedKeys(m) {
		pk, ok := d.props[key]
		if !ok {
			fail("%s has no property %q", arg, key)
			continue
		}
		check(errs, path+"."+key, m[key], pk)
		if lo, ok := d.minimum[key]; ok {
			if n, ok := m[key].(json.Number); ok {
				if i, err := n.Int64(); err == nil && i < int64(lo) {
					fail("%s.%s is %d, below its minimum %d", arg, key, i, lo)
				}
			}
		}
		if lo, ok := d.minItems[key]; ok {
			if list, _ := m[key].([]any); len(list) < lo {
				fail("%s.%s has %d items, fewer than %d", arg, key, len(list), lo)
			}
		}
	}
}

// elem is the kind of an array's or map's elements.
func elem(arg string) kind {
	switch arg {
	case "any", "string", "integer", "boolean":
		return kind(arg)
	}
	return kind("object:" + arg)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// crossCheck applies the specification's rules that the schema cannot
// express, on a log that passed check.
func crossCheck(errs *[]error, v any) {
	fail := func(path, format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	num := func(m map[string]any, key string) (int, bool) {
		n, ok := m[key].(json.Number)
		if !ok {
			return 0, false
		}
		i, err := n.Int64()
		return int(i), err == nil
	}
	var regions func(path string, loc map[string]any)
	regions = func(path string, loc map[string]any) {
		pl, _ := loc["physicalLocation"].(map[string]any)
		r, _ := pl["region"].(map[string]any)
		sl, ok1 := num(r, "startLine")
		el, ok2 := num(r, "endLine")
		if ok1 && ok2 && el < sl {
			fail(path, "region ends on line %d, before its start line %d", el, sl)
		}
		sc, ok3 := num(r, "startColumn")
		ec, ok4 := num(r, "endColumn")
		if ok1 && ok2 && ok3 && ok4 && el == sl && ec < sc {
			fail(path, "region ends at column %d, before its start column %d", ec, sc)
		}
	}
	for ri, run := range v.(map[string]any)["runs"].([]any) {
		run := run.(map[string]any)
		driver := run["tool"].(map[string]any)["driver"].(map[string]any)
		rules, _ := driver["rules"].([]any)
		results, _ := run["results"].([]any)
		for i, res := range results {
			res := res.(map[string]any)
			path := fmt.Sprintf("$.runs[%d].results[%d]", ri, i)
			if idx, ok := num(res, "ruleIndex"); ok && idx >= 0 {
				if idx >= len(rules) {
					fail(path, "ruleIndex %d, but the driver has %d rules", idx, len(rules))
				} else if id := rules[idx].(map[string]any)["id"]; res["ruleId"] != nil && id != res["ruleId"] {
					fail(path, "ruleIndex %d names rule %v, not the ruleId %v", idx, id, res["ruleId"])
				}
			}
			locs, _ := res["locations"].([]any)
			for j, l := range locs {
				regions(fmt.Sprintf("%s.locations[%d]", path, j), l.(map[string]any))
			}
			seen := make(map[int]bool)
			related, _ := res["relatedLocations"].([]any)
			for j, l := range related {
				l := l.(map[string]any)
				p := fmt.Sprintf("%s.relatedLocations[%d]", path, j)
				regions(p, l)
				if id, ok := num(l, "id"); ok {
					if seen[id] {
						fail(p, "id %d repeats", id)
					}
					seen[id] = true
				}
			}
		}
	}
}
