package report

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// The HTML report is one self-contained file: inline CSS and SVG, no
// script, no font, image or style sheet fetched, so that it reads the
// same offline and attached to a ticket.

// chartWidth and chartHeight are the SVG's user units; CSS scales it.
const (
	chartWidth  = 800.0
	chartHeight = 180.0
	chartPad    = 4.0
)

// svgChart is one chart: a path through the points that have a value,
// broken (a new M) where a point has none, and a dashed reference line.
type svgChart struct {
	Title  string
	Class  string
	Path   string
	Points int // points drawn: one M or L each
	RefY   string
	Ref    string // the reference line's label
	Top    string // the labels of the y range
	Bottom string
	Empty  bool
}

func buildChart(title, class string, s *SLO, value func(Point) *float64, ref float64, refLabel string, format func(float64) string) svgChart {
	c := svgChart{Title: title, Class: class, Ref: refLabel}
	lo, hi := ref, ref
	for _, p := range s.Chart.Points {
		if v := value(p); v != nil {
			lo, hi = math.Min(lo, *v), math.Max(hi, *v)
		}
	}
	if hi-lo < 1e-9 {
		lo, hi = lo-0.5, hi+0.5
	}
	span := s.End.Sub(s.Start).Seconds()
	x := func(p Point) float64 {
		return chartPad + (chartWidth-2*chartPad)*p.T.Sub(s.Start).Seconds()/span
	}
	y := func(v float64) float64 { return chartPad + (chartHeight-2*chartPad)*(hi-v)/(hi-lo) }
	var d strings.Builder
	pen := false
	for _, p := range s.Chart.Points {
		v := value(p)
		if v == nil {
			pen = false
			continue
		}
		cmd := "L"
		if !pen {
			cmd = "M"
		}
		fmt.Fprintf(&d, "%s%s %s ", cmd, num(x(p)), num(y(*v)))
		pen = true
		c.Points++
	}
	c.Path = strings.TrimSpace(d.String())
	c.Empty = c.Points == 0
	c.RefY = num(y(ref))
	c.Top, c.Bottom = format(hi), format(lo)
	return c
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

type htmlSLO struct {
	*SLO
	Rows   []row
	Charts []svgChart
}

func renderHTML(w *bytes.Buffer, r *Report) error {
	data := struct {
		Title        string
		Warnings     []string
		FileWarnings []string
		SLOs         []htmlSLO
		Width        float64
		Height       float64
	}{Title: header(r), Warnings: r.Warnings, FileWarnings: r.FileWarnings, Width: chartWidth, Height: chartHeight}
	pct := func(v float64) string { return fmtPercent(&v) }
	for i := range r.SLOs {
		s := &r.SLOs[i]
		data.SLOs = append(data.SLOs, htmlSLO{SLO: s, Rows: rows(s), Charts: []svgChart{
			buildChart("SLI per "+s.Chart.Step+" (objective dashed)", "sli", s, func(p Point) *float64 { return p.SLI }, s.Objective, "objective "+fmtObjective(s.Objective), pct),
			buildChart("Error budget remaining since the window's start", "budget", s, func(p Point) *float64 { return p.BudgetRemaining }, 0, "budget spent", pct),
		}})
	}
	if err := htmlTemplate.Execute(w, data); err != nil {
		return fmt.Errorf("report: html: %w", err)
	}
	return nil
}

var htmlTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; padding: 0 1em; color: #1a1a1a; }
h1 { font-size: 1.3em; }
h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; width: 100%; }
td { padding: 0.15em 0.6em; vertical-align: top; border-bottom: 1px solid #eee; }
td:first-child { white-space: nowrap; color: #555; width: 11em; }
.breached { color: #b00020; font-weight: bold; }
.met { color: #1b5e20; font-weight: bold; }
.warning { background: #fff3cd; border: 1px solid #e0c060; padding: 0.5em; }
figure { margin: 1em 0; }
figcaption { font-size: 0.9em; color: #555; }
svg.chart { display: block; width: 100%; height: auto; border: 1px solid #ddd; background: #fafafa; }
svg.chart path.series { fill: none; stroke-width: 1.5; }
svg.sli path.series { stroke: #1565c0; }
svg.budget path.series { stroke: #6a1b9a; }
svg.chart line.ref { stroke: #b00020; stroke-dasharray: 4 3; stroke-width: 1; }
svg.chart text { font-size: 11px; fill: #555; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{- if .Warnings}}
<p class="warning">The API returned warnings; numbers may be partial:</p>
<ul class="warning">{{range .Warnings}}<li>{{.}}</li>{{end}}</ul>
{{- end}}
{{- if .FileWarnings}}
<p class="warning">The SLO file has problems that concern only its rules; the report goes on without them:</p>
<ul class="warning">{{range .FileWarnings}}<li>{{.}}</li>{{end}}</ul>
{{- end}}
{{- range .SLOs}}
<section id="{{.ID}}">
<h2>{{.ID}} <span class="{{if eq .Status "breached"}}breached{{else if eq .Status "met"}}met{{end}}">{{.Status}}</span></h2>
{{- if .Description}}<p>{{.Description}}</p>{{end}}
<table>
{{- range .Rows}}
<tr><td>{{.Label}}</td><td>{{.Value}}</td></tr>
{{- end}}
</table>
{{- range .Charts}}
<figure>
<figcaption>{{.Title}}{{if .Empty}}: no events in the window{{end}}</figcaption>
<svg class="chart {{.Class}}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {{$.Width}} {{$.Height}}" width="{{$.Width}}" height="{{$.Height}}" role="img" aria-label="{{.Title}}" data-points="{{.Points}}">
<line class="ref" x1="0" x2="{{$.Width}}" y1="{{.RefY}}" y2="{{.RefY}}"/>
<text x="6" y="14">{{.Top}}</text>
<text x="6" y="{{$.Height}}" dy="-4">{{.Bottom}}</text>
<text x="{{$.Width}}" dx="-6" y="{{.RefY}}" dy="-3" text-anchor="end">{{.Ref}}</text>
<path class="series" d="{{.Path}}"/>
</svg>
</figure>
{{- end}}
</section>
{{- end}}
</body>
</html>
`))
