// Command sarifcheck checks that each file named is a SARIF 2.1.0 log (see
// sarif.Validate) and prints, for each, its number of results by rule.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/gpustate/gpustate/internal/sarif"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sarifcheck FILE.sarif...")
		os.Exit(2)
	}
	code := 0
	for _, name := range os.Args[1:] {
		data, err := os.ReadFile(name)
		if err == nil {
			err = sarif.Validate(data)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			code = 1
			continue
		}
		var log sarif.Log
		if err := json.Unmarshal(data, &log); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			code = 1
			continue
		}
		counts := make(map[string]int)
		for _, run := range log.Runs {
			for _, r := range run.Results {
				counts[r.RuleID]++
			}
		}
		var ids []string
		for id := range counts {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			fmt.Printf("%s %s %d\n", name, id, counts[id])
		}
	}
	os.Exit(code)
}
