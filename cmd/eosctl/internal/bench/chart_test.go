package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The chart of the committed sweep (docs/bench.json) keeps clear of the
// image's edges: the right-hand panel's legend, right-aligned, ran its line
// glyphs into the right edge of the PNG, where they looked clipped.
func TestChartKeepsClearOfTheEdges(t *testing.T) {
	b, err := os.ReadFile("../../../../docs/bench.json")
	if err != nil {
		t.Fatal(err)
	}
	var rep *Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bench.png")
	if err := WriteChart(path, rep); err != nil {
		t.Fatal(err)
	}
	img := checkPNG(t, path)
	// The drawn pixels' bounding box must leave a clear band of 4mm (23
	// pixels at the chart's 144 dpi) on the right, and 1mm elsewhere.
	r := img.Bounds()
	minX, minY, maxX, maxY := r.Max.X, r.Max.Y, r.Min.X, r.Min.Y
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if cr, cg, cb, _ := img.At(x, y).RGBA(); cr < 0xf000 || cg < 0xf000 || cb < 0xf000 {
				minX, minY, maxX, maxY = min(minX, x), min(minY, y), max(maxX, x), max(maxY, y)
			}
		}
	}
	const mm, right = 5, 23 // pixels: 1mm and 4mm at 144 dpi
	t.Logf("drawn: x %d..%d, y %d..%d of %v", minX, maxX, minY, maxY, r)
	if minX < r.Min.X+mm || minY < r.Min.Y+mm || maxY >= r.Max.Y-mm || maxX >= r.Max.X-right {
		t.Fatalf("drawn x %d..%d, y %d..%d of %v: the chart runs into the image's edge", minX, maxX, minY, maxY, r)
	}
}

// singleRun is the report of one interval on a real cluster, where eos ran
// three times as fast as the baseline: the shape that drew every mode as a
// dot of one colour, a loss axis down to -200% and the title "rtt 0s".
func singleRun() *Report {
	runs := []RunResult{}
	for round := 1; round <= 2; round++ {
		for m, v := range map[Mode]float64{ModeBaseline: 100_000, ModeBare: 250_000, ModeEOS: 300_000, ModeKStreams: 50_000} {
			runs = append(runs, RunResult{Round: round, Mode: m, Interval: "100ms", Size: 100, RPS: v, Verified: true})
		}
	}
	c := cell("100ms", 100, 1_000_000, runs)
	return &Report{Params: Params{Broker: "external", Brokers: []string{"kafka-1:9092", "kafka-2:9092", "kafka-3:9092"}, RTT: "0s",
		Topology: "passthrough", Sizes: []int{100}, Modes: []Mode{ModeBaseline, ModeBare, ModeEOS, ModeKStreams}}, Cells: []Cell{c}}
}

// The chart of a single run on a real cluster draws each mode in its own
// colour, with a legend naming every mode; the loss axis stays within
// ±100% (the label says a point was clamped), never the -200% of eos at 3x
// the baseline; and the title names the cluster's broker, not "rtt 0s".
func TestChartOfASingleRunShowsEachModeApart(t *testing.T) {
	rep := singleRun()
	if rep.Cells[0].LossPct != -200 {
		t.Fatalf("fixture: loss %v%%, want -200%%", rep.Cells[0].LossPct)
	}
	path := filepath.Join(t.TempDir(), "one.svg")
	if err := WriteChart(path, rep); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, m := range []Mode{ModeBaseline, ModeBare, ModeEOS, ModeKStreams} {
		if !strings.Contains(svg, ">"+string(m)+"<") {
			t.Errorf("the legend has no entry %q", m)
		}
		r, g, bl, _ := modeColor(m).RGBA()
		stroke := fmt.Sprintf("stroke:#%02X%02X%02X", r>>8, g>>8, bl>>8)
		if !strings.Contains(strings.ToUpper(svg), strings.ToUpper(stroke)) {
			t.Errorf("nothing is drawn in %s's colour (%s)", m, stroke)
		}
	}
	colours := map[string]Mode{}
	for _, m := range chartModes {
		r, g, bl, _ := modeColor(m).RGBA()
		k := fmt.Sprint(r, g, bl)
		if o, ok := colours[k]; ok {
			t.Errorf("%s and %s share a colour", m, o)
		}
		colours[k] = m
	}
	if !strings.Contains(svg, "on kafka-1:9092 (+2)") || strings.Contains(svg, "rtt") {
		t.Errorf("the title does not name the broker (or still names an rtt)")
	}
	_, loss, err := chartPlots(rep)
	if err != nil {
		t.Fatal(err)
	}
	if loss.Y.Min < -1.2*lossLimit || loss.Y.Max > 1.5*lossLimit || !strings.Contains(loss.Y.Label.Text, "clamped at ±100%") {
		t.Errorf("the loss axis runs %.0f..%.0f%% (%q); want it within about ±%d%%, saying it clamped", loss.Y.Min, loss.Y.Max, loss.Y.Label.Text, lossLimit)
	}
	for _, tick := range loss.Y.Tick.Marker.Ticks(loss.Y.Min, loss.Y.Max) {
		if tick.Value < -1.2*lossLimit {
			t.Errorf("a loss tick at %v%%", tick.Value)
		}
	}
}
