package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// ChartFormats are the file extensions WriteChart accepts.
var ChartFormats = []string{".svg", ".png"}

// CheckChartPath reports whether path names a chart format WriteChart can
// write. Run checks Config.ChartPaths with it before any benchmark runs;
// a caller that draws charts of a saved Report can check its own paths
// the same way.
func CheckChartPath(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	for _, f := range ChartFormats {
		if ext == f {
			return nil
		}
	}
	return eos.BadConfig("bench.Config.ChartPaths", "chart %q: the file name must end in .svg or .png", path)
}

// WriteChart draws two panels against the commit interval (log scale):
// throughput, one line per mode and record size, each mode in its own
// colour (modeColor) and each size in its own dash, with a legend; and
// eos's throughput loss in percent against the baseline and against the
// bare loop, in those modes' colours, its axis clamped to ±100% (a mode
// three times as fast as another is a loss of -200%, which would flatten
// every other line; the axis label says when a point was clamped). A run
// of one interval so still shows each mode apart. An auto cell is drawn as
// a triangle at the interval it settled on. The title names the brokers of
// a real cluster, the RTT of the embedded one. The format follows path's
// extension (.svg or .png); the file is written atomically.
func WriteChart(path string, r *Report) error {
	if err := CheckChartPath(path); err != nil {
		return err
	}
	rps, loss, err := chartPlots(r)
	if err != nil {
		return err
	}
	const w, h = 26 * vg.Centimeter, 11 * vg.Centimeter
	return WriteFile(path, func(out io.Writer) error {
		var c vg.CanvasWriterTo
		if strings.EqualFold(filepath.Ext(path), ".png") {
			c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(144))}
		} else {
			c = vgsvg.New(w, h)
		}
		dc := draw.New(c)
		// Fill the background: PNG is transparent otherwise.
		dc.SetColor(color.White)
		dc.Fill(dc.Rectangle.Path())
		tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
			PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
		plots := [][]*plot.Plot{{rps, loss}}
		cs := plot.Align(plots, tiles, dc)
		rps.Draw(cs[0][0])
		loss.Draw(cs[0][1])
		_, err := c.WriteTo(out)
		return err
	})
}

// chartModes are the modes the chart draws, in the order of their
// colours.
var chartModes = []Mode{ModeEOS, ModeBaseline, ModeBare, ModeKStreams, ModeEOSNoPreagg}

// modeColor is a mode's colour on the chart: the same in both panels, so
// that the loss against the baseline is drawn in the baseline's colour.
func modeColor(m Mode) color.Color {
	return plotutil.Color(max(slices.Index(chartModes, m), 0))
}

// sizeDashes are the dashes of each record size's lines, in the order of
// Params.Sizes.
var sizeDashes = [][]vg.Length{nil, {vg.Points(5), vg.Points(3)}, {vg.Points(1.5), vg.Points(2.5)},
	{vg.Points(6), vg.Points(2), vg.Points(1.5), vg.Points(2)}}

// lossLimit is the loss axis' bound, in percent, either way.
const lossLimit = 100

// chartTitle names the topology and what it ran on.
func chartTitle(p Params) string {
	if p.Broker == "external" && len(p.Brokers) > 0 {
		on := p.Brokers[0]
		if len(p.Brokers) > 1 {
			on += fmt.Sprintf(" (+%d)", len(p.Brokers)-1)
		}
		return fmt.Sprintf("%s throughput on %s", p.Topology, on)
	}
	return fmt.Sprintf("%s throughput, embedded broker, rtt %s", p.Topology, p.RTT)
}

// chartPlots builds the two panels.
func chartPlots(r *Report) (rps, loss *plot.Plot, err error) {
	rps, loss = plot.New(), plot.New()
	p := r.Params
	rps.Title.Text = chartTitle(p)
	rps.Y.Label.Text = "records/s (median of rounds)"
	loss.Title.Text = "exactly-once throughput loss of eos"
	loss.Y.Label.Text = "eos loss vs baseline, vs bare, %"
	var ticks plot.ConstantTicks
	seen := map[float64]bool{}
	clamped := false
	clamp := func(v float64) float64 {
		if math.Abs(v) > lossLimit {
			clamped = true
			return math.Copysign(lossLimit, v)
		}
		return v
	}
	for i, size := range p.Sizes {
		lines := map[Mode]plotter.XYs{}
		var lossPts, bareLoss, autoRPS, autoLoss plotter.XYs
		for _, c := range r.Cells {
			if c.Size != size || c.Rounds == 0 {
				continue
			}
			x, auto := cellX(c)
			if x <= 0 {
				continue
			}
			if !seen[x] && !auto {
				seen[x] = true
				ticks = append(ticks, plot.Tick{Value: x, Label: c.Interval})
			}
			if auto {
				autoRPS = append(autoRPS, plotter.XY{X: x, Y: c.Modes[ModeEOS].RPS})
				autoLoss = append(autoLoss, plotter.XY{X: x, Y: clamp(c.LossPct)})
				continue
			}
			for _, m := range []Mode{ModeEOS, ModeBaseline, ModeBare, ModeKStreams, ModeEOSNoPreagg} {
				if v := c.Modes[m].RPS; v > 0 {
					lines[m] = append(lines[m], plotter.XY{X: x, Y: v})
				}
			}
			eos := c.Modes[ModeEOS].RPS
			if c.Modes[ModeBaseline].RPS > 0 && eos > 0 {
				lossPts = append(lossPts, plotter.XY{X: x, Y: clamp(c.LossPct)})
			}
			if c.Modes[ModeBare].RPS > 0 && eos > 0 {
				bareLoss = append(bareLoss, plotter.XY{X: x, Y: clamp((1 - c.Ratio(ModeEOS, ModeBare).Median) * 100)})
			}
		}
		dashes := sizeDashes[i%len(sizeDashes)]
		label := fmt.Sprintf(" %d B", size)
		if size == 0 {
			label = "" // the aggregate's input has its own records
		}
		if len(p.Sizes) == 1 {
			label = "" // one size: the modes are the legend
		}
		for _, m := range chartModes {
			if err := addLine(rps, sortXY(lines[m]), modeColor(m), dashes, string(m)+label); err != nil {
				return nil, nil, err
			}
		}
		if err := addLine(loss, sortXY(lossPts), modeColor(ModeBaseline), dashes, "vs baseline"+label); err != nil {
			return nil, nil, err
		}
		if err := addLine(loss, sortXY(bareLoss), modeColor(ModeBare), dashes, "vs bare"+label); err != nil {
			return nil, nil, err
		}
		for _, a := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{rps, autoRPS}, {loss, autoLoss}} {
			if len(a.xys) == 0 {
				continue
			}
			s, err := plotter.NewScatter(a.xys)
			if err != nil {
				return nil, nil, err
			}
			s.Color, s.Shape, s.Radius = modeColor(ModeEOS), draw.TriangleGlyph{}, vg.Points(5)
			a.p.Add(s)
			a.p.Legend.Add("eos auto"+label, s)
		}
	}
	sort.Slice(ticks, func(a, b int) bool { return ticks[a].Value < ticks[b].Value })
	for _, pl := range []*plot.Plot{rps, loss} {
		pl.X.Label.Text = "commit interval (log scale)"
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = ticks
		if len(ticks) > 0 {
			pl.X.Min, pl.X.Max = ticks[0].Value/1.5, ticks[len(ticks)-1].Value*1.5
		}
		pl.Add(plotter.NewGrid())
		pl.Legend.Top = true
	}
	// Headroom above the data for the legends.
	rps.Y.Min, rps.Y.Max = 0, rps.Y.Max*1.4
	rps.Legend.Left = true
	// The loss panel's legend is right-aligned: its line glyphs ran into
	// the image's right edge. Keep it inside the panel's axes.
	loss.Legend.XOffs = -4 * vg.Millimeter
	lo, hi := math.Max(math.Min(0, loss.Y.Min), -lossLimit), math.Min(math.Max(loss.Y.Max, 1), lossLimit)
	loss.Y.Min, loss.Y.Max = lo-0.1*(hi-lo), hi+0.45*(hi-lo)
	if clamped {
		loss.Y.Label.Text += fmt.Sprintf(" (clamped at ±%d%%)", lossLimit)
	}
	loss.Add(zeroLine(loss.X.Min, loss.X.Max))
	return rps, loss, nil
}

func sortXY(xys plotter.XYs) plotter.XYs {
	sort.Slice(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
	return xys
}

// cellX is where a cell sits on the interval axis, in milliseconds: its
// interval, or for auto the interval it settled on.
func cellX(c Cell) (x float64, auto bool) {
	if c.Interval == "auto" {
		return c.Modes[ModeEOS].OpenP50Ms, true
	}
	d, err := time.ParseDuration(c.Interval)
	if err != nil {
		return 0, false
	}
	return ms(d), false
}

func addLine(p *plot.Plot, xys plotter.XYs, col color.Color, dashes []vg.Length, label string) error {
	if len(xys) == 0 {
		return nil
	}
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color, l.Dashes, l.Width = col, dashes, vg.Points(1.5)
	s.Color, s.Shape = col, draw.CircleGlyph{}
	p.Add(l, s)
	p.Legend.Add(label, l, s)
	return nil
}

// zeroLine marks no loss on the loss panel.
func zeroLine(x0, x1 float64) plot.Plotter {
	l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}})
	if err != nil {
		return plotter.NewGrid()
	}
	l.Color, l.Width = color.Gray{Y: 96}, vg.Points(0.8)
	return l
}
