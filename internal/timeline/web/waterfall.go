package web

import (
	"fmt"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// Geometry of the waterfall, in CSS pixels: the SVG's viewBox equals its
// width and height, so one user unit is one pixel on the page.
const (
	// BarAreaPx is the width of the time axis: the longest of the
	// episode's duration and its stages' durations spans it. A stage
	// reached d seconds after the start is a bar of d/longest*BarAreaPx
	// pixels from the left of the area (docs/timelines.md; the browser
	// test checks it from the API's durationSeconds).
	BarAreaPx = 600
	labelPx   = 200 // stage name and duration, left of the bars
	rowPx     = 20
	barPx     = 12
	axisPx    = 18 // the row of the axis labels, above the bars
	rightPx   = 64 // room for the end label
	minBarPx  = 1  // a stage reached at once is still a visible bar
)

// waterfall is the view of one episode's stages.
type waterfall struct {
	Width, Height int
	AreaX         int // left of the bar area
	DurX, NoteX   int // right of the durations, left of the notes
	BarH          int
	TrackW        float64 // the episode's duration, as a background band
	TrackH        int
	EndLabel      string // the longest duration, at the right of the axis
	EndX          float64
	Rows          []waterfallRow
}

type waterfallRow struct {
	Stage   string
	Y       int  // top of the row
	TextY   int  // baseline of its labels
	BarY    int  // top of its bar
	Reached bool // with a bar when Bar is true
	Bar     bool
	BarW    float64
	// Duration is the stage's duration as text; Note says why a row has
	// no bar (not reached, blocking, reached before the exporter saw it).
	Duration, Note string
	Blocking       bool
	Title          string // the bar's tooltip
}

// newWaterfall lays out ep's stages: one row per stage, a bar for each
// stage reached with a time, from the episode's start to the stage's.
func newWaterfall(ep timeline.Episode) waterfall {
	longest := ep.DurationSeconds
	for _, s := range ep.Stages {
		if s.DurationSeconds != nil && *s.DurationSeconds > longest {
			longest = *s.DurationSeconds
		}
	}
	px := func(d float64) float64 {
		if longest <= 0 {
			return 0
		}
		return d / longest * BarAreaPx
	}
	w := waterfall{
		Width:    labelPx + BarAreaPx + rightPx,
		Height:   axisPx + len(ep.Stages)*rowPx + 4,
		AreaX:    labelPx,
		DurX:     labelPx - 6,
		NoteX:    labelPx + 4,
		BarH:     barPx,
		TrackW:   max(px(ep.DurationSeconds), minBarPx),
		TrackH:   len(ep.Stages) * rowPx,
		EndLabel: formatSeconds(longest),
		EndX:     labelPx + BarAreaPx,
	}
	for i, s := range ep.Stages {
		y := axisPx + i*rowPx
		row := waterfallRow{Stage: s.Stage, Y: y, TextY: y + 14, BarY: y + (rowPx-barPx)/2, Reached: s.Reached}
		switch {
		case s.Reached && s.DurationSeconds != nil:
			row.Bar = true
			row.BarW = max(px(*s.DurationSeconds), minBarPx)
			row.Duration = formatSeconds(*s.DurationSeconds)
			row.Title = fmt.Sprintf("%s reached %s after the write", s.Stage, row.Duration)
			if s.At != nil {
				row.Title += " (" + s.At.UTC().Format(timeLayout) + ")"
			}
		case s.Reached:
			row.Note = "reached before the exporter saw the episode"
		case ep.State != timeline.StateClosed && s.Stage == ep.Stage:
			row.Blocking = true
			row.Note = "waiting"
			if ep.Reason != "" {
				row.Note += ": " + ep.Reason
			}
		default:
			row.Note = "not reached"
		}
		w.Rows = append(w.Rows, row)
	}
	return w
}

// formatSeconds writes a duration in seconds with millisecond precision
// below a minute and in minutes and seconds above.
func formatSeconds(d float64) string {
	if d < 60 {
		return fmt.Sprintf("%.3f s", d)
	}
	m := int(d / 60)
	return fmt.Sprintf("%d min %.1f s", m, d-float64(m)*60)
}
