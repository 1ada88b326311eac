// Package report builds burn-rate reports of SLOs over any
// Prometheus-compatible query API (Prometheus, Thanos, Mimir): attainment,
// error budget, burn rates per alert window pair, the worst namespaces and
// kinds, compliance per calendar month, gaps and zero traffic.
//
// Every number comes from the raw series the SLO's SLI reads, never from
// the recording rules of `slo generate`: backfilled history and freshly
// deployed rules have no recorded series. Only /api/v1/query and
// /api/v1/query_range are used, and /api/v1/targets for the scrape
// interval when it answers. The math (math.go) is pure; Build does
// the queries; the renderers (text, markdown, json, html) only format a
// Report.
package report

import (
	"fmt"
	"time"
)

// Report is the document every format renders; its JSON form is described
// by docs/report.schema.json.
type Report struct {
	// At is the end of every window, in the report's time zone.
	At time.Time `json:"at"`
	// Source is the query API's base URL.
	Source   string `json:"source"`
	Timezone string `json:"timezone"`
	SLOs     []SLO  `json:"slos"`
	// Warnings are the API's warnings (partial responses of Thanos or
	// Mimir), each once, prefixed with the SLO.
	Warnings []string `json:"warnings"`
	// Partial: some SLO's numbers came with API warnings.
	Partial bool `json:"partial"`
	// FileWarnings are the SLO file's problems that concern only rule
	// generation (a tier without a window pair for a 1d period, ...):
	// `slo validate` refuses the file, the report goes on without the
	// tier (Options.FileWarnings).
	FileWarnings []string `json:"fileWarnings"`
}

// Status of an SLO over its window.
const (
	StatusMet      = "met"
	StatusBreached = "breached"
	// StatusNoEvents: the series exist but counted no event in the window.
	StatusNoEvents = "no events"
	// StatusNoData: none of the SLI's series had a sample in the window.
	StatusNoData = "no data"
)

// SLO is the report of one SLO.
type SLO struct {
	ID          string `json:"id"` // sloth_id
	Service     string `json:"service"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// SLI is the indicator, e.g. latency kube_convergence_rollout_duration_seconds <= 300.0.
	SLI       string  `json:"sli"`
	Objective float64 `json:"objective"`
	// Window is the report window (the SLO's period unless --window),
	// written like a period (30d); Start and End bound it.
	Window string    `json:"window"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Status string    `json:"status"`
	// Attainment is 1 - bad/total over the window; nil without events.
	Attainment *float64   `json:"attainment"`
	Events     Events     `json:"events"`
	Budget     Budget     `json:"budget"`
	Exhaustion Exhaustion `json:"exhaustion"`
	BurnRates  []BurnRate `json:"burnRates"`
	FiringTier *string    `json:"firingTier"`
	Worst      Worst      `json:"worst"`
	Months     []Month    `json:"months"`
	// Gaps are the MaxGapRows longest runs without a sample, in time
	// order; GapsOmitted counts the others.
	Gaps           []Period       `json:"gaps"`
	GapsOmitted    int            `json:"gapsOmitted"`
	ScrapeInterval ScrapeInterval `json:"scrapeInterval"`
	ZeroTraffic    []Period       `json:"zeroTraffic"`
	Chart          Chart          `json:"chart"`
	// Warnings are the API's warnings to this SLO's queries; Partial is
	// whether there were any: the numbers may then miss what a store
	// down behind Thanos or Mimir holds.
	Warnings []string `json:"warnings"`
	Partial  bool     `json:"partial"`
}

// ScrapeInterval is the interval gaps are judged against and where it
// came from.
type ScrapeInterval struct {
	Interval string `json:"interval"`
	// Source: "flag" (--scrape-interval), "targets" (the largest
	// scrapeInterval of the active targets of the SLI's jobs in
	// /api/v1/targets), "samples" (the median spacing of the window's
	// minutes with a sample) or "default" (1m: none of those).
	Source string `json:"source"`
	// MinGap is the shortest run without a sample reported as a gap:
	// more than two intervals, at least 2m.
	MinGap string `json:"minGap"`
}

// Sources of ScrapeInterval.
const (
	IntervalFlag    = "flag"
	IntervalTargets = "targets"
	IntervalSamples = "samples"
	IntervalDefault = "default"
)

// Events are counted over a range with Prometheus's increase() (or, for
// good-minutes SLIs, in minutes).
type Events struct {
	Good  float64 `json:"good"`
	Bad   float64 `json:"bad"`
	Total float64 `json:"total"`
}

// Budget is the error budget of the window in events: Total = (1 -
// objective) x total events, Consumed = bad events, Remaining = Total -
// Consumed (negative once overspent). RemainingRatio is Remaining / Total,
// nil without events.
type Budget struct {
	Total          float64  `json:"total"`
	Consumed       float64  `json:"consumed"`
	Remaining      float64  `json:"remaining"`
	RemainingRatio *float64 `json:"remainingRatio"`
}

// Exhaustion is when the window's remaining budget runs out at the recent
// bad-event rate, in events (docs/report.md): B = Budget.Remaining, r =
// RecentBad per RecentWindow; At = report time + B / r, unless B <= 0
// (exhausted), r = 0 or B / r is at least the window ("not at this
// rate").
type Exhaustion struct {
	// State: "projected", "exhausted" (B <= 0), "not at this rate" (no
	// bad event in the recent window, or the budget lasts to Horizon),
	// "no events" (in the window).
	State string `json:"state"`
	// At is the projected date; nil unless State is "projected".
	At *time.Time `json:"at"`
	// Since is when an exhausted budget ran out: the first minute by
	// which the window's bad events reached its budget; nil unless State
	// is "exhausted" (or no minute can place it).
	Since *time.Time `json:"since"`
	// RecentWindow (1d) and RecentBad, the bad events in it: the rate r.
	RecentWindow string  `json:"recentWindow"`
	RecentBad    float64 `json:"recentBad"`
	// Horizon is the report time plus the window: a budget that lasts
	// until then at this rate is "not at this rate".
	Horizon time.Time `json:"horizon"`
	// BurnRate1d is the error ratio of the last day over the budget ratio;
	// nil without events in the last day. Shown, not used: the date comes
	// from events.
	BurnRate1d *float64 `json:"burnRate1d"`
}

// Exhaustion states.
const (
	ExhaustionProjected = "projected"
	ExhaustionExhausted = "exhausted"
	ExhaustionNever     = "not at this rate"
	ExhaustionNoEvents  = "no events"
)

// BurnRate is one kept alert window pair of the SLO's tiers, evaluated at
// At from the raw series: the rules' condition without `for`.
type BurnRate struct {
	Tier   string  `json:"tier"`
	Long   string  `json:"long"`
	Short  string  `json:"short"`
	Factor float64 `json:"factor"`
	// LongRate and ShortRate are error ratio / budget ratio; nil without
	// events in the window.
	LongRate  *float64 `json:"longRate"`
	ShortRate *float64 `json:"shortRate"`
	// LongEvents are the events of the long window, for MinEvents.
	LongEvents float64 `json:"longEvents"`
	MinEvents  int     `json:"minEvents"`
	Firing     bool    `json:"firing"`
}

// Worst lists the label values that burnt the most budget, by bad
// events, at most five each; a list is empty when the SLI has no such
// label (Stages: unless the SLO spans several stages).
type Worst struct {
	Namespaces []Contributor `json:"namespaces"`
	Kinds      []Contributor `json:"kinds"`
	Stages     []Contributor `json:"stages"`
}

// Contributor is one label value and its bad events.
type Contributor struct {
	Value string  `json:"value"`
	Bad   float64 `json:"bad"`
	// Share is Bad over all bad events of the window.
	Share float64 `json:"share"`
}

// Month is the compliance of one calendar month (in the report's time
// zone) overlapping the window, over the part that overlaps.
type Month struct {
	Month      string    `json:"month"` // 2026-10
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	Events     Events    `json:"events"`
	Attainment *float64  `json:"attainment"`
	// Status is met, breached, no events or no data.
	Status string `json:"status"`
}

// Period is a stretch of time: a gap in the data or a run without events.
type Period struct {
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Duration string    `json:"duration"`
}

// Chart is the SLI and the remaining budget over the window, one point
// per Step.
type Chart struct {
	Step   string  `json:"step"`
	Points []Point `json:"points"`
	// BadApportioned: the ratio SLI's errorQuery is not a sum of
	// counters' rates (e.g. total - good), so the bad events per step are
	// the window's error ratio times the step's events, an approximation;
	// the SLI line is then flat where traffic is.
	BadApportioned bool `json:"badApportioned,omitempty"`
}

// Point is one chart step ending at T: SLI is 1 - bad/total within the
// step, BudgetRemaining the budget ratio left from the window's start to
// T; each nil when there were no events.
type Point struct {
	T               time.Time `json:"t"`
	SLI             *float64  `json:"sli"`
	BudgetRemaining *float64  `json:"budgetRemaining"`
}

// Unanswered lists the SLOs a release gate cannot pass on, and why: no
// data, no events, or a partial answer (API warnings). allowNoData
// passes the first two; a partial answer is never passed: its numbers
// may lack a store's share.
func (r *Report) Unanswered(allowNoData bool) []string {
	var out []string
	for i := range r.SLOs {
		s := &r.SLOs[i]
		switch {
		case s.Partial:
			out = append(out, fmt.Sprintf("%s: partial answer: %d API warning(s)", s.ID, len(s.Warnings)))
		case (s.Status == StatusNoData || s.Status == StatusNoEvents) && !allowNoData:
			out = append(out, s.ID+": "+s.Status)
		}
	}
	return out
}

// Breached reports whether any SLO's attainment is below its objective.
func (r *Report) Breached() bool {
	for i := range r.SLOs {
		if r.SLOs[i].Status == StatusBreached {
			return true
		}
	}
	return false
}
