package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// A standalone run is go vet with statevet as its own vet tool:
//
//	go vet -vettool=<this executable> -json [-tags=...] -NAME... packages
//
// The go command loads the packages, type-checks and analyzes one package
// per process (facts travel between them as files) and caches both the
// facts and each package's JSON results, so a second run over unchanged
// packages analyzes nothing. The -NAME flags enable only the statevet
// analyzers selected, so go vet's own suite, which the vet tool also
// carries, stays off. statevet then reads the JSON values (one per package
// and test variant, in the order the packages finish) and prints them as
// text, JSON or SARIF, or applies their fixes.

// goVet runs go vet over patterns with the selected analyzers and returns
// what it reported. It returns nil and an exit code when go vet reported
// nothing it could read; otherwise the result, with exitError when go vet
// failed (build errors or packages that do not load, printed to stderr).
func goVet(patterns []string, analyzers []*analysis.Analyzer, o *options, stderr io.Writer) (*result, int) {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "statevet: %v\n", err)
		return nil, exitError
	}
	args := []string{"vet", "-vettool=" + exe, "-json"}
	if o.tags != "" {
		args = append(args, "-tags="+o.tags)
	}
	for _, a := range analyzers {
		args = append(args, "-"+a.Name)
	}
	args = append(args, patterns...)
	cmd := exec.Command("go", args...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	runErr := cmd.Run()
	code := exitClean
	if runErr != nil {
		var ee *exec.ExitError
		if !errors.As(runErr, &ee) {
			fmt.Fprintf(stderr, "statevet: %v\n", runErr)
			return nil, exitError
		}
		code = exitError // go vet printed why
	}
	res, err := parseVetJSON(&stdout, o.tests)
	if err != nil {
		fmt.Fprintf(stderr, "statevet: reading go vet's output: %v\n", err)
		return nil, exitError
	}
	if code != exitClean && len(res.findings) == 0 && len(res.errs) == 0 {
		return nil, code
	}
	return res, code
}

// parseVetJSON reads the JSON values go vet -json prints, one per package
// analyzed: package ID, then analyzer name, then a list of diagnostics or
// an error. Each finding is kept once; with tests false, findings in test
// files are dropped.
func parseVetJSON(r io.Reader, tests bool) (*result, error) {
	dec := json.NewDecoder(r)
	res := new(result)
	seen := make(map[string]bool)
	for {
		var tree map[string]map[string]json.RawMessage
		if err := dec.Decode(&tree); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		for id, byAnalyzer := range tree {
			pkg, _, _ := strings.Cut(id, " ") // "p [p.test]" is p's test variant
			for analyzer, raw := range byAnalyzer {
				if err := res.add(pkg, analyzer, raw, tests, seen); err != nil {
					return nil, err
				}
			}
		}
	}
	slices.SortFunc(res.findings, func(a, b finding) int {
		return cmp.Or(cmp.Compare(a.posn.Filename, b.posn.Filename), cmp.Compare(a.posn.Line, b.posn.Line),
			cmp.Compare(a.posn.Column, b.posn.Column), cmp.Compare(a.analyzer, b.analyzer),
			cmp.Compare(a.diag.Message, b.diag.Message), cmp.Compare(a.pkg, b.pkg))
	})
	slices.SortFunc(res.errs, func(a, b actionErr) int {
		return cmp.Or(cmp.Compare(a.pkg, b.pkg), cmp.Compare(a.analyzer, b.analyzer))
	})
	return res, nil
}

// add adds the diagnostics or the error one analyzer reported on one
// package.
func (res *result) add(pkg, analyzer string, raw json.RawMessage, tests bool, seen map[string]bool) error {
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
		var e jsonError
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		res.errs = append(res.errs, actionErr{pkg, analyzer, e.Err})
		return nil
	}
	var diags []jsonDiagnostic
	if err := json.Unmarshal(raw, &diags); err != nil {
		return err
	}
	for _, d := range diags {
		posn := parsePosn(d.Posn)
		if !tests && strings.HasSuffix(posn.Filename, "_test.go") {
			continue
		}
		k := strings.Join([]string{d.Posn, d.End, analyzer, d.Message}, "\x00")
		if seen[k] {
			continue
		}
		seen[k] = true
		res.findings = append(res.findings, finding{pkg: pkg, analyzer: analyzer, diag: d, posn: posn})
	}
	return nil
}

// parsePosn parses a position as go vet -json writes it: file:line:col,
// file:line or file (the file name may itself hold colons).
func parsePosn(s string) token.Position {
	var p token.Position
	rest := s
	var nums []int
	for range 2 {
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			break
		}
		n, err := strconv.Atoi(rest[i+1:])
		if err != nil {
			break
		}
		nums = append(nums, n)
		rest = rest[:i]
	}
	p.Filename = rest
	switch len(nums) {
	case 2:
		p.Line, p.Column = nums[1], nums[0]
	case 1:
		p.Line = nums[0]
	}
	return p
}
