// Package report builds burn-rate reports of SLOs over any
// Prometheus-compatible query API (Prometheus, Thanos, Mimir): attainment,
// error budget, burn rates per alert window pair, the worst namespaces and
// kinds, compliance per calendar month, gaps and zero traffic.
//
// Every number comes from the raw series the SLO's SLI reads, never from
// the recording rules of `slo generate`: backfilled history and freshly
// deployed rules have no recorded series. Only /api/v1/query and
// /api/v1/query_range are used. The math (math.go) is pure; Build does
// the queries; the renderers (text, markdown, json, html) only format a
// Report.
package report

import (
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
	Attainment  *float64   `json:"attainment"`
	Events      Events     `json:"events"`
	Budget      Budget     `json:"budget"`
	Exhaustion  Exhaustion `json:"exhaustion"`
	BurnRates   []BurnRate `json:"burnRates"`
	FiringTier  *string    `json:"firingTier"`
	Worst       Worst      `json:"worst"`
	Months      []Month    `json:"months"`
	Gaps        []Period   `json:"gaps"`
	ZeroTraffic []Period   `json:"zeroTraffic"`
	Chart       Chart      `json:"chart"`
	Warnings    []string   `json:"warnings"`
}

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

// Exhaustion is when the remaining budget runs out at the 1d burn rate:
// At = report time + remainingRatio x window / burnRate1d.
type Exhaustion struct {
	// BurnRate1d is the error ratio of the last day over the budget ratio;
	// nil without events in the last day.
	BurnRate1d *float64 `json:"burnRate1d"`
	// At is the projected date; nil when State is not "projected".
	At *time.Time `json:"at"`
	// State: "projected", "exhausted" (no budget left), "not at the
	// current rate" (the last day burnt nothing or had no events, or the
	// date is more than 100 years away), "no events" (in the window).
	State string `json:"state"`
}

// Exhaustion states.
const (
	ExhaustionProjected = "projected"
	ExhaustionExhausted = "exhausted"
	ExhaustionNever     = "not at the current rate"
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

// Breached reports whether any SLO's attainment is below its objective.
func (r *Report) Breached() bool {
	for i := range r.SLOs {
		if r.SLOs[i].Status == StatusBreached {
			return true
		}
	}
	return false
}
