package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/contract"
	"github.com/gpustate/gpustate/gen"
)

// svgElem is an element of a chart, as encoding/xml reads it.
type svgElem struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Text     string     `xml:",chardata"`
	Children []svgElem  `xml:",any"`
}

func (e svgElem) attr(name string) string {
	for _, a := range e.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (e svgElem) num(t *testing.T, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(e.attr(name), 64)
	if err != nil {
		t.Fatalf("<%s> attribute %s: %v", e.XMLName.Local, name, err)
	}
	return v
}

// byClass returns the elements of a class, in document order.
func (e svgElem) byClass(class string) []svgElem {
	var out []svgElem
	for _, c := range e.Children {
		if c.attr("class") == class {
			out = append(out, c)
		}
		out = append(out, c.byClass(class)...)
	}
	return out
}

// TestCharts renders the report of every golden package with charts: each
// checkpointed type whose trade-off is charted gets its SVG, linked from
// the Markdown, with one point per placement of the Pareto set at its
// memory and cost, the declared policy marked, and its labels.
func TestCharts(t *testing.T) {
	charted := 0
	for _, name := range []string{"kv", "grid", "clash", "ring", "prefix", "history"} {
		p := load(t, name)
		md, charts, err := Render([]*gen.Package{p}, Options{Charts: "CONTRACTS"})
		if err != nil {
			t.Fatal(err)
		}
		byName := make(map[string][]byte)
		for _, c := range charts {
			byName[c.Name] = c.SVG
		}
		for _, c := range p.Contracts.Contracts {
			h := newHistory(c, 0)
			file := "CONTRACTS-" + strings.ToLower(c.Type) + ".svg"
			if !c.Valid || h == nil || h.refused != "" {
				if byName[file] != nil {
					t.Errorf("%s: a chart for %s, which has no charted history", name, c.Type)
				}
				continue
			}
			charted++
			svg := byName[file]
			if svg == nil {
				t.Errorf("%s: no chart %s for checkpointed type %s", name, file, c.Type)
				continue
			}
			if !bytes.Contains(md, []byte("]("+file+")")) {
				t.Errorf("%s: the report does not link %s", name, file)
			}
			checkChart(t, c, h, svg)
		}
	}
	if charted < 5 {
		t.Errorf("%d golden types charted, want every checkpointed one (5 at least)", charted)
	}
}

// checkChart checks one chart against the history it draws.
func checkChart(t *testing.T, c *contract.Contract, h *history, svg []byte) {
	t.Helper()
	var root svgElem
	if err := xml.Unmarshal(svg, &root); err != nil {
		t.Fatalf("%s: the chart is not XML: %v", c.Type, err)
	}
	if root.XMLName.Local != "svg" || root.XMLName.Space != "http://www.w3.org/2000/svg" {
		t.Fatalf("%s: root element %v, want svg", c.Type, root.XMLName)
	}
	if !bytes.Contains(svg, []byte(SVGMarker)) {
		t.Errorf("%s: the chart lacks the generated marker", c.Type)
	}
	points := root.byClass("point")
	if len(points) != len(h.front) {
		t.Fatalf("%s: %d points, the Pareto set has %d placements", c.Type, len(points), len(h.front))
	}
	for i, pt := range points {
		pl := h.front[i]
		if got, want := pt.attr("data-memory"), fmt.Sprint(pl.Memory); got != want {
			t.Errorf("%s point %d: memory %s, want %s", c.Type, i, got, want)
		}
		if got, want := pt.num(t, "data-cost"), math.Round(h.ch.expected(pl)); got != want {
			t.Errorf("%s point %d: cost %v, want %v", c.Type, i, got, want)
		}
		if i == 0 {
			continue
		}
		// More memory lies to the right, and buys a lower cost: lower
		// on the chart, a larger y in SVG.
		prev := points[i-1]
		if pt.num(t, "cx") <= prev.num(t, "cx") || pt.num(t, "cy") < prev.num(t, "cy") {
			t.Errorf("%s point %d at (%s, %s) does not lie right of and below point %d at (%s, %s)",
				c.Type, i, pt.attr("cx"), pt.attr("cy"), i-1, prev.attr("cx"), prev.attr("cy"))
		}
		if x, y := pt.num(t, "cx"), pt.num(t, "cy"); x < plotLeft || x > plotRight || y < plotTop || y > plotBottom {
			t.Errorf("%s point %d at (%v, %v) is outside the plot", c.Type, i, x, y)
		}
	}
	decl := root.byClass("declared")
	if len(decl) != 1 {
		t.Fatalf("%s: %d declared markers, want 1", c.Type, len(decl))
	}
	if got, want := decl[0].attr("data-checkpoints"), fmt.Sprint(len(h.declared)); got != want {
		t.Errorf("%s: the declared marker has %s checkpoints, want %s", c.Type, got, want)
	}
	if h.same >= 0 {
		// The declared policy is on the front: its marker surrounds
		// that point.
		pt := points[h.same]
		d := decl[0].attr("d")
		if want := fmt.Sprintf("M%s %.1f", pt.attr("cx"), pt.num(t, "cy")-declaredSize); !strings.HasPrefix(d, want) {
			t.Errorf("%s: the declared marker %q does not sit on point %d at (%s, %s)", c.Type, d, h.same, pt.attr("cx"), pt.attr("cy"))
		}
	}
	labels := map[string]string{
		"title":          c.Type + ": checkpoint memory against expected reconstruction cost",
		"declared-label": "declared: " + h.policy(true),
		"xlabel":         "checkpoint memory",
		"ylabel":         "expected reconstruction cost",
		"subtitle":       fmt.Sprintf("window of %d versions", h.w.window),
	}
	for class, want := range labels {
		els := root.byClass(class)
		if len(els) != 1 || !strings.Contains(els[0].Text, want) {
			t.Errorf("%s: label %s is %v, want one containing %q", c.Type, class, els, want)
		}
	}
	if ticks := root.byClass("xtick"); len(ticks) < 3 || ticks[0].Text != "0 B" {
		t.Errorf("%s: x ticks %v, want 3 at least from 0 B", c.Type, ticks)
	}
	if ticks := root.byClass("ytick"); len(ticks) < 3 || ticks[0].Text != "0 B" {
		t.Errorf("%s: y ticks %v, want 3 at least from 0 B", c.Type, ticks)
	}
}

// TestChartNames: a type's chart is named after it, and after its package
// where two packages declare the same type.
func TestChartNames(t *testing.T) {
	a, b := load(t, "kv"), load(t, "kv")
	b.Path, b.Name = "example.com/other/kv2", "kv2"
	names := chartNames([]*gen.Package{a, b}, "R")
	for _, c := range a.Contracts.Contracts {
		lc := strings.ToLower(c.Type)
		if got, want := names[a.Path+"."+c.Type], "R-kv-"+lc+".svg"; got != want {
			t.Errorf("chart of %s.%s: %q, want %q", a.Path, c.Type, got, want)
		}
		if got, want := names[b.Path+"."+c.Type], "R-kv2-"+lc+".svg"; got != want {
			t.Errorf("chart of %s.%s: %q, want %q", b.Path, c.Type, got, want)
		}
	}
	if got := chartNames([]*gen.Package{a}, "R"); got[a.Path+"."+a.Contracts.Contracts[0].Type] != "R-"+strings.ToLower(a.Contracts.Contracts[0].Type)+".svg" {
		t.Errorf("one package: %v", got)
	}
}
