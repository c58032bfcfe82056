package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
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
