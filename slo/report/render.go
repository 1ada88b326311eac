package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// Formats of Render.
const (
	FormatText     = "text"
	FormatMarkdown = "markdown"
	FormatJSON     = "json"
	FormatHTML     = "html"
)

// Formats lists the formats Render accepts.
func Formats() []string { return []string{FormatText, FormatMarkdown, FormatJSON, FormatHTML} }

// Render writes the report in format.
func Render(w io.Writer, r *Report, format string) error {
	var b bytes.Buffer
	switch format {
	case FormatText:
		renderText(&b, r)
	case FormatMarkdown:
		renderMarkdown(&b, r)
	case FormatJSON:
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("report: json: %w", err)
		}
	case FormatHTML:
		if err := renderHTML(&b, r); err != nil {
			return err
		}
	default:
		return fmt.Errorf("report: unknown format %q (want one of %s)", format, strings.Join(Formats(), ", "))
	}
	_, err := w.Write(b.Bytes())
	return err
}

// row is one line of an SLO's summary: the text and markdown formats print
// the same rows.
type row struct{ Label, Value string }

const timeLayout = "2006-01-02 15:04 MST"

func fmtTime(t time.Time) string { return t.Format(timeLayout) }

// fmtPercent writes a ratio as a percentage with four decimals: an
// objective of 99.99% needs them.
func fmtPercent(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return strconv.FormatFloat(100**p, 'f', 4, 64) + "%"
}

// fmtCount writes an event count with at most two decimals: increase()
// extrapolates, so counts are rarely whole.
func fmtCount(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

func fmtRate(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return strconv.FormatFloat(*p, 'f', 2, 64) + "x"
}

func fmtFactor(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) + "x" }

func fmtObjective(o float64) string { return strconv.FormatFloat(100*o, 'f', -1, 64) + "%" }

func attainmentText(s *SLO) string {
	switch s.Status {
	case StatusNoData:
		return "no data: none of the SLI's series had a sample in the window"
	case StatusNoEvents:
		return "no events in the window"
	}
	return fmtPercent(s.Attainment) + " (" + s.Status + ")"
}

func exhaustionText(s *SLO) string {
	e := s.Exhaustion
	left := fmtCount(s.Budget.Remaining) + " events of budget left"
	rate := fmt.Sprintf("%s at %s bad events in the last %s", left, fmtCount(e.RecentBad), e.RecentWindow)
	switch e.State {
	case ExhaustionProjected:
		return fmt.Sprintf("%s, in %s: %s", fmtTime(*e.At), formatDuration(e.At.Sub(s.End).Round(time.Minute)), rate)
	case ExhaustionExhausted:
		over := fmtCount(-s.Budget.Remaining) + " events over"
		if s.Budget.Remaining == 0 {
			over = "none left"
		}
		if e.Since != nil {
			return fmt.Sprintf("exhausted since %s (%s)", fmtTime(*e.Since), over)
		}
		return "exhausted (" + over + ")"
	case ExhaustionNever:
		if e.RecentBad <= 0 {
			return fmt.Sprintf("not at this rate: %s, no bad event in the last %s", left, e.RecentWindow)
		}
		recent, err := slo.ParseDuration(e.RecentWindow)
		if err != nil {
			return "not at this rate: " + rate
		}
		lasts := time.Duration(s.Budget.Remaining / e.RecentBad * float64(recent))
		return fmt.Sprintf("not at this rate: %s last %s, at least the %s window", rate, formatDuration(lasts.Round(time.Minute)), s.Window)
	}
	return "n/a (no events)"
}

func burnRateText(b BurnRate) string {
	s := fmt.Sprintf("%s %s/%s > %s: long %s, short %s", b.Tier, b.Long, b.Short, fmtFactor(b.Factor), fmtRate(b.LongRate), fmtRate(b.ShortRate))
	if b.MinEvents > 0 {
		s += fmt.Sprintf(", %s events in %s (minEvents %d)", fmtCount(b.LongEvents), b.Long, b.MinEvents)
	}
	if b.Firing {
		s += " FIRING"
	}
	return s
}

func contributorsText(cs []Contributor) string {
	if len(cs) == 0 {
		return "none"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s %s (%s)", c.Value, fmtCount(c.Bad), fmtPercent(&c.Share))
	}
	return strings.Join(parts, ", ")
}

func monthText(m Month) string {
	switch m.Status {
	case StatusNoData:
		return fmt.Sprintf("%s: no data", m.Month)
	case StatusNoEvents:
		return fmt.Sprintf("%s: no events", m.Month)
	}
	return fmt.Sprintf("%s: %s %s (%s of %s events bad)", m.Month, fmtPercent(m.Attainment), m.Status, fmtCount(m.Events.Bad), fmtCount(m.Events.Total))
}

func periodText(p Period) string {
	return fmt.Sprintf("%s to %s (%s)", fmtTime(p.Start), fmtTime(p.End), p.Duration)
}

// rows are the summary of one SLO; a list value gives one row per item.
func rows(s *SLO) []row {
	b := s.Budget
	rs := []row{
		{"SLI", s.SLI},
		{"window", fmt.Sprintf("%s, %s to %s", s.Window, fmtTime(s.Start), fmtTime(s.End))},
		{"objective", fmtObjective(s.Objective)},
		{"attainment", attainmentText(s)},
		{"events", fmt.Sprintf("good %s, bad %s, total %s", fmtCount(s.Events.Good), fmtCount(s.Events.Bad), fmtCount(s.Events.Total))},
		{"error budget", fmt.Sprintf("total %s, consumed %s, remaining %s (%s)", fmtCount(b.Total), fmtCount(b.Consumed), fmtCount(b.Remaining), fmtPercent(b.RemainingRatio))},
		{"budget runs out", exhaustionText(s)},
	}
	for _, br := range s.BurnRates {
		rs = append(rs, row{"burn rate", burnRateText(br)})
	}
	firing := "none"
	if s.FiringTier != nil {
		firing = *s.FiringTier
	}
	rs = append(rs, row{"tier firing now", firing})
	rs = append(rs, row{"worst namespaces", contributorsText(s.Worst.Namespaces)})
	if len(s.Worst.Kinds) > 0 {
		rs = append(rs, row{"worst kinds", contributorsText(s.Worst.Kinds)})
	}
	if len(s.Worst.Stages) > 0 {
		rs = append(rs, row{"worst stages", contributorsText(s.Worst.Stages)})
	}
	for _, m := range s.Months {
		rs = append(rs, row{"month", monthText(m)})
	}
	si := s.ScrapeInterval
	rs = append(rs, row{"scrape interval", fmt.Sprintf("%s (%s): a gap is %s or more without a sample", si.Interval, intervalSource(si.Source), si.MinGap)})
	if len(s.Gaps) == 0 {
		rs = append(rs, row{"gaps", "none"})
	}
	for _, g := range s.Gaps {
		rs = append(rs, row{"gap (no samples)", periodText(g)})
	}
	if s.GapsOmitted > 0 {
		rs = append(rs, row{"gap (no samples)", fmt.Sprintf("and %d more, none longer than those listed", s.GapsOmitted)})
	}
	for _, z := range s.ZeroTraffic {
		rs = append(rs, row{"zero traffic", periodText(z)})
	}
	if s.Chart.BadApportioned {
		rs = append(rs, row{"chart", "approximate: the errorQuery is not a sum of counters' rates, so bad events per step are the window's error ratio spread over the step's events"})
	}
	for _, w := range s.Warnings {
		rs = append(rs, row{"API warning", w})
	}
	return rs
}

func intervalSource(src string) string {
	switch src {
	case IntervalFlag:
		return "--scrape-interval"
	case IntervalTargets:
		return "the targets API"
	case IntervalSamples:
		return "the samples' spacing"
	}
	return "default"
}

// apiWarnings counts the SLOs' API warnings.
func apiWarnings(r *Report) int {
	n := 0
	for i := range r.SLOs {
		n += len(r.SLOs[i].Warnings)
	}
	return n
}

func header(r *Report) string {
	return fmt.Sprintf("SLO report at %s (%s), from %s", fmtTime(r.At), r.Timezone, r.Source)
}

func renderText(w *bytes.Buffer, r *Report) {
	fmt.Fprintln(w, header(r))
	if r.Partial {
		fmt.Fprintf(w, "WARNING: the API returned %d warning(s), numbers may be partial\n", apiWarnings(r))
	}
	for _, fw := range r.FileWarnings {
		fmt.Fprintf(w, "SLO file: %s\n", fw)
	}
	for i := range r.SLOs {
		s := &r.SLOs[i]
		fmt.Fprintf(w, "\n%s (service %s, slo %s)\n", s.ID, s.Service, s.Name)
		for _, rw := range rows(s) {
			fmt.Fprintf(w, "  %-18s %s\n", rw.Label, rw.Value)
		}
	}
}

// mdEscaper makes any text (an SLO's description, an API warning, a
// label value) one line of literal markdown: CommonMark's backslash
// escapes for the characters that start emphasis, links, code spans and
// table cells (the backslash itself first), entities for HTML, and <br>
// for line breaks, which would end a table row.
var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "|", `\|`, "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "`", "\\`",
	"<", "&lt;", ">", "&gt;", "\r\n", "<br>", "\n", "<br>", "\r", "<br>",
)

func mdEscape(s string) string { return mdEscaper.Replace(s) }

func renderMarkdown(w *bytes.Buffer, r *Report) {
	fmt.Fprintf(w, "# %s\n", mdEscape(header(r)))
	if r.Partial {
		fmt.Fprintf(w, "\n> **Warning:** the API returned %d warning(s), numbers may be partial.\n", apiWarnings(r))
	}
	for _, fw := range r.FileWarnings {
		fmt.Fprintf(w, "\n> SLO file: %s\n", mdEscape(fw))
	}
	for i := range r.SLOs {
		s := &r.SLOs[i]
		fmt.Fprintf(w, "\n## %s\n\n", mdEscape(s.ID))
		if s.Description != "" {
			fmt.Fprintf(w, "%s\n\n", mdEscape(s.Description))
		}
		fmt.Fprintln(w, "| | |")
		fmt.Fprintln(w, "| --- | --- |")
		for _, rw := range rows(s) {
			fmt.Fprintf(w, "| %s | %s |\n", mdEscape(rw.Label), mdEscape(rw.Value))
		}
	}
}
