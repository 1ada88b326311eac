// Package slo reads SLO specifications (this project's YAML, or OpenSLO v1
// SLO/SLI documents), validates them against what the exporter really
// exposes, and generates Prometheus rules: Sloth-compatible recording rules
// and multi-window multi-burn-rate alerts.
//
// The package is pure: no HTTP, no Kubernetes client, no global state. The
// bundled SLOs (rules/slos.yaml), `kube-convergence-exporter slo` and
// `make generate` all go through Load/Parse and Generate.
package slo

import (
	"fmt"
	"math/big"
	"strings"
	"time"
)

// File is a validated SLO file.
type File struct {
	// Name is where the file came from, used in messages (file:line).
	Name string
	SLOs []SLO
}

// SLO is one service level objective, whatever format it was written in.
type SLO struct {
	Service     string // sloth_service
	Name        string // sloth_slo; sloth_id is Service-Name
	Description string
	// Labels go on every recorded series and alert of the SLO.
	Labels map[string]string
	// Objective is the target fraction of good events, in (0, 1), exact as
	// written (0.999 stays 0.999, so the budget is exactly 0.001).
	Objective *big.Rat
	// Period is the rolling window the objective holds over.
	Period   time.Duration
	SLI      SLI
	Alerting Alerting
	// Line is where the SLO starts in File.Name (0 when unknown).
	Line int
}

// ID is the sloth_id label value.
func (s *SLO) ID() string { return s.Service + "-" + s.Name }

// ObjectiveFloat is the objective as a float64.
func (s *SLO) ObjectiveFloat() float64 { f, _ := s.Objective.Float64(); return f }

// Budget is the error budget, 1 - objective, exact.
func (s *SLO) Budget() *big.Rat { return new(big.Rat).Sub(big.NewRat(1, 1), s.Objective) }

// SLI is exactly one of the indicator kinds.
type SLI struct {
	Latency     *LatencySLI
	GoodMinutes *GoodMinutesSLI
	Ratio       *RatioSLI
}

// Kind names the indicator ("latency", "goodMinutes", "ratio").
func (s SLI) Kind() string {
	switch {
	case s.Latency != nil:
		return "latency"
	case s.GoodMinutes != nil:
		return "goodMinutes"
	case s.Ratio != nil:
		return "ratio"
	}
	return ""
}

// LatencySLI is the share of episodes that reached a stage within
// Threshold: good = the histogram's le="T" bucket, bad = the matching
// *_threshold_exceeded_total{threshold="T"} counter, which counts an episode
// the moment its age passes T, so stuck objects burn budget while stuck.
type LatencySLI struct {
	// Metric is the histogram family, e.g. kube_convergence_rollout_duration_seconds.
	Metric string
	// Threshold is T in seconds; it must be one of the histogram's buckets.
	Threshold float64
	// Match selects on the metric's own labels (kind, stage, ...): one value
	// is an equality matcher, several a regex alternation.
	Match map[string][]string
	// Scope selects on target labels the metric does not have itself (job,
	// cluster, ...), the same way.
	Scope map[string][]string
}

// GoodMinutesSLI is the fraction of minutes in which a condition held, the
// way SIG Scalability words its SLIs: a minute is bad when BadWhen returns a
// sample, and counts at all only when CountWhen returns one (so minutes
// without data are neither good nor bad).
type GoodMinutesSLI struct {
	BadWhen   string
	CountWhen string
}

// RatioSLI is the ratio of two PromQL expressions, per-second rates with
// {{.window}} where the range goes (Sloth's convention): ErrorQuery counts
// bad events, TotalQuery all events.
type RatioSLI struct {
	ErrorQuery string
	TotalQuery string
}

// WindowPlaceholder is replaced by the window in RatioSLI queries.
const WindowPlaceholder = "{{.window}}"

// Alerting configures the burn-rate alerts of one SLO.
type Alerting struct {
	// Name is the alertname of both tiers (they differ by slo_tier).
	Name        string
	RunbookURL  string
	Labels      map[string]string // on the alerts of both tiers
	Annotations map[string]string // on the alerts of both tiers
	Page        Tier
	Ticket      Tier
	// NoEvents is the ticket for an SLI that counted nothing while the
	// exporter was up: a selector that matches nothing (a relabelled
	// namespace label, a renamed job) looks exactly like a quiet cluster
	// to the burn-rate alerts, which never fire without events.
	NoEvents NoEvents
}

// NoEvents configures the no-events ticket of one SLO.
type NoEvents struct {
	Enabled bool
	// For is how long the SLI must have counted no event, with the
	// exporter up, before the ticket fires.
	For time.Duration
}

// DefaultNoEventsFor: a day, so that a weekend without deployments in a
// small cluster opens at most one ticket for rollout SLIs, and a broken
// selector is found the next working day.
const DefaultNoEventsFor = 24 * time.Hour

// Tier is the page or the ticket tier.
type Tier struct {
	Enabled bool
	For     time.Duration
	// MinEvents is how many events the long window must hold before the
	// tier may fire (low-traffic guard); 0 turns the guard off.
	MinEvents int
	Labels    map[string]string
	// Windows are the tier's alert conditions; the defaults are the SRE
	// workbook's, filtered by Window.Kept for the period.
	Windows []Window
	// Dropped are default windows left out because their budget share is
	// above 100% for the period (empty for explicit windows).
	Dropped []Window
}

// Tier names, the value of the slo_tier (and sloth_severity) label.
const (
	TierPage   = "page"
	TierTicket = "ticket"
)

// Defaults of the alerting tiers.
const (
	// DefaultPageMinEvents is a floor against paging on a handful of
	// events: one slow rollout out of three (33%) is above both page
	// thresholds of a 99% objective (14.4% and 6%). With at least 10 events
	// in the long window, the 1h pair needs 2 bad ones (20%). A noise floor,
	// not a statistical guarantee: raise it for busy SLIs such as pod
	// startup.
	DefaultPageMinEvents = 10
	// DefaultPageFor and DefaultTicketFor: the short window already stops
	// the alert soon after the burning stops; `for` only absorbs a single
	// evaluation's spike (2 m) or, for tickets, an hour's noise (15 m).
	DefaultPageFor   = 2 * time.Minute
	DefaultTicketFor = 15 * time.Minute
)

// Notes returns what a reader of `slo validate` should know but is not an
// error: the pairs dropped for each SLO's period.
func (f *File) Notes() []string {
	var notes []string
	for i := range f.SLOs {
		s := &f.SLOs[i]
		for _, t := range []struct {
			name string
			tier Tier
		}{{TierPage, s.Alerting.Page}, {TierTicket, s.Alerting.Ticket}} {
			if !t.tier.Enabled {
				continue
			}
			for _, w := range t.tier.Dropped {
				notes = append(notes, fmt.Sprintf("%s: slo %q: %s pair %s dropped: it would spend %.0f%% of the %s budget (> 100%%)",
					position(f.Name, s.Line), s.Name, t.name, w, 100*w.BudgetShare(s.Period), FormatDuration(s.Period)))
			}
			if len(t.tier.Windows) == 0 {
				notes = append(notes, fmt.Sprintf("%s: slo %q: the %s tier has no window pair left for a %s period: no %s alert",
					position(f.Name, s.Line), s.Name, t.name, FormatDuration(s.Period), t.name))
			}
		}
	}
	return notes
}

// Error is an error at a line of a file; it prints as file:line: message.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string { return position(e.File, e.Line) + ": " + e.Msg }

func position(file string, line int) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", file, line)
	}
	return file
}

// formatRat writes an exact decimal without trailing zeros: 0.01, 0.999.
func formatRat(r *big.Rat) string {
	s := r.FloatString(12)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
