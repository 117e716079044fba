// Command testprogress runs go test and prints each package's result as
// soon as the package finishes, rather than in the order the packages were
// listed (a slow package early in the list holds back go test's own output
// of every package after it), and says every minute which packages are
// still running:
//
//	go run ./scripts/testprogress -race -count=1 ./...
//
// It runs go test -json with its arguments, prints "ok", "FAIL" or "?"
// lines as go test does, with a failed package's output and any build
// failure in full, and exits with go test's exit code.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// event is a test2json event (go doc test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Elapsed    float64
	Output     string
}

func main() {
	cmd := exec.Command("go", append([]string{"test", "-json"}, os.Args[1:]...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fatal(err)
	}
	if err := cmd.Start(); err != nil {
		fatal(err)
	}
	p := newPrinter(os.Stdout, time.Now)
	stop := p.heartbeat(time.Minute)
	err = p.read(stdout)
	stop()
	if werr := cmd.Wait(); werr != nil {
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			os.Exit(ee.ExitCode())
		}
		fatal(werr)
	}
	if err != nil {
		fatal(err)
	}
	if p.failed {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "testprogress:", err)
	os.Exit(1)
}

// printer prints package results as they come.
type printer struct {
	mu      sync.Mutex
	w       io.Writer
	now     func() time.Time
	started map[string]time.Time // packages running
	output  map[string][]string  // per package, or per import path for build output
	failed  bool
}

func newPrinter(w io.Writer, now func() time.Time) *printer {
	return &printer{w: w, now: now, started: make(map[string]time.Time), output: make(map[string][]string)}
}

// read handles the events of r until its end.
func (p *printer) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not an event (go test's own messages): pass it on.
			p.mu.Lock()
			fmt.Fprintln(p.w, sc.Text())
			p.mu.Unlock()
			continue
		}
		p.handle(e)
	}
	return sc.Err()
}

func (p *printer) handle(e event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case e.Action == "build-output":
		p.output[e.ImportPath] = append(p.output[e.ImportPath], e.Output)
	case e.Action == "build-fail":
		fmt.Fprint(p.w, strings.Join(p.output[e.ImportPath], ""))
		delete(p.output, e.ImportPath)
		p.failed = true
	case e.Test != "" && e.Action != "output":
	case e.Action == "start":
		p.started[e.Package] = p.now()
	case e.Action == "output":
		p.output[e.Package] = append(p.output[e.Package], e.Output)
	case e.Action == "pass", e.Action == "fail", e.Action == "skip":
		p.finish(e)
	}
}

// finish prints a package's result: its summary line, as go test prints
// it, or its whole output when it failed.
func (p *printer) finish(e event) {
	out := p.output[e.Package]
	delete(p.output, e.Package)
	delete(p.started, e.Package)
	if e.Action == "fail" {
		p.failed = true
		fmt.Fprint(p.w, strings.Join(out, ""))
		if len(out) == 0 || !strings.HasPrefix(out[len(out)-1], "FAIL") {
			fmt.Fprintf(p.w, "FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
		}
		return
	}
	// The last line is go test's summary ("ok  pkg 1.2s", "?  pkg [no
	// test files]"); the lines before it are the package's own output.
	for _, line := range slices.Backward(out) {
		if strings.HasPrefix(line, "ok  \t") || strings.HasPrefix(line, "?   \t") || strings.HasPrefix(line, "ok\t") {
			fmt.Fprint(p.w, line)
			return
		}
	}
	if e.Action == "skip" {
		fmt.Fprintf(p.w, "?   \t%s\t[no test files]\n", e.Package)
		return
	}
	fmt.Fprintf(p.w, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
}

// heartbeat says, every interval, which packages are still running and
// for how long; the function it returns stops it.
func (p *printer) heartbeat(interval time.Duration) func() {
	done := make(chan struct{})
	t := time.NewTicker(interval)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.mu.Lock()
				if line := p.running(); line != "" {
					fmt.Fprintln(p.w, line)
				}
				p.mu.Unlock()
			}
		}
	}()
	return func() { t.Stop(); close(done) }
}

// running lists the packages running, longest first: "still running:
// pkg (1m5s), ...", "" when none.
func (p *printer) running() string {
	type run struct {
		pkg string
		d   time.Duration
	}
	var runs []run
	for pkg, t := range p.started {
		runs = append(runs, run{pkg, p.now().Sub(t).Truncate(time.Second)})
	}
	if len(runs) == 0 {
		return ""
	}
	slices.SortFunc(runs, func(a, b run) int {
		if a.d != b.d {
			return int(b.d - a.d)
		}
		return strings.Compare(a.pkg, b.pkg)
	})
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = fmt.Sprintf("%s (%s)", r.pkg, r.d)
	}
	return "still running: " + strings.Join(parts, ", ")
}
