package report

import (
	"sort"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// minute is the resolution of gaps, zero traffic and charts: the issue's
// definition of a gap is a run of at least two 1-minute steps without a
// sample of the SLI's total series.
const minute = time.Minute

// minGap is the shortest gap reported: one missing minute is a scrape
// that came a little late (a 1m scrape interval puts samples 60 s apart,
// and jitter moves one out of its minute), two are not.
const minGap = 2

// MinZeroTraffic is the shortest run without events reported as zero
// traffic. Shorter quiet runs are the normal life of rollout SLIs (a night
// without deployments); 12 h still shows every calendar day without
// traffic, and the no-events ticket of `slo generate` fires after
// slo.DefaultNoEventsFor (24 h) of it.
const MinZeroTraffic = 12 * time.Hour

// ratio is 1 - bad/total, nil without events.
func attainment(e Events) *float64 {
	if e.Total <= 0 {
		return nil
	}
	return ptr(1 - e.Bad/e.Total)
}

func ptr[T any](v T) *T { return &v }

// status is met or breached against the objective, or why there is no
// attainment.
func status(e Events, present bool, objective float64) string {
	switch {
	case !present:
		return StatusNoData
	case e.Total <= 0:
		return StatusNoEvents
	case 1-e.Bad/e.Total < objective:
		return StatusBreached
	}
	return StatusMet
}

// budgetOf is the window's error budget in events. budget is 1 -
// objective, computed exactly (slo.SLO.Budget): 1 - 0.99 in float64 is
// 0.010000000000000009, which would leave a budget spent to the event a
// remainder of 1e-13.
func budgetOf(e Events, budget float64) Budget {
	b := Budget{Total: budget * e.Total, Consumed: e.Bad}
	b.Remaining = b.Total - b.Consumed
	if b.Total > 0 {
		b.RemainingRatio = ptr(b.Remaining / b.Total)
	}
	return b
}

// burnRate is the error ratio of e over the budget ratio, nil without
// events.
func burnRate(e Events, budget float64) *float64 {
	if e.Total <= 0 {
		return nil
	}
	return ptr(e.Bad / e.Total / budget)
}

// maxExhaustion is the furthest projection reported as a date: beyond a
// century a date says nothing a reader can act on, and time.Time stops
// marshalling to JSON at year 9999 (encoding/json's RFC 3339 limit).
const maxExhaustion = 100 * 365 * slo.Day

// exhaustionOf is the date the budget runs out at the 1d burn rate (issue
// 16): the remaining budget over the budget burnt per unit of time. The
// window's budget is budget x total events, spent at a 1x burn rate in one
// window, so at the last day's burn rate the remaining share lasts
// remainingRatio x window / burnRate1d. A last day that burnt nothing (or
// had no events) projects nothing: "not at the current rate".
func exhaustionOf(at time.Time, window time.Duration, b Budget, day Events, budget float64) Exhaustion {
	x := Exhaustion{BurnRate1d: burnRate(day, budget)}
	switch {
	case b.RemainingRatio == nil:
		x.State = ExhaustionNoEvents
		return x
	case *b.RemainingRatio <= 0:
		x.State = ExhaustionExhausted
		return x
	case x.BurnRate1d == nil || *x.BurnRate1d <= 0:
		x.State = ExhaustionNever
		return x
	}
	d := *b.RemainingRatio * float64(window) / *x.BurnRate1d
	if d > float64(maxExhaustion) {
		x.State = ExhaustionNever
		return x
	}
	x.State, x.At = ExhaustionProjected, ptr(at.Add(time.Duration(d)).Round(time.Millisecond))
	return x
}

// firing evaluates the rules' alert condition on the pairs: both windows
// above Factor x budget and, with MinEvents, enough events in the long
// window. The page tier wins over the ticket tier.
func firing(pairs []BurnRate) *string {
	var tier *string
	for i := range pairs {
		p := &pairs[i]
		p.Firing = p.LongRate != nil && p.ShortRate != nil &&
			*p.LongRate > p.Factor && *p.ShortRate > p.Factor &&
			(p.MinEvents == 0 || p.LongEvents >= float64(p.MinEvents))
		if p.Firing && (tier == nil || p.Tier == slo.TierPage) {
			tier = ptr(p.Tier)
		}
	}
	return tier
}

// monthSpan is the part of one calendar month that overlaps a window.
type monthSpan struct {
	label      string
	start, end time.Time
}

// months splits [start, end] at the calendar month boundaries of loc.
func months(start, end time.Time, loc *time.Location) []monthSpan {
	var spans []monthSpan
	s := start.In(loc)
	for s.Before(end) {
		next := time.Date(s.Year(), s.Month()+1, 1, 0, 0, 0, 0, loc)
		e := next
		if e.After(end) {
			e = end.In(loc)
		}
		spans = append(spans, monthSpan{label: s.Format("2006-01"), start: s, end: e})
		s = next
	}
	return spans
}

// minutes are the SLI's events per 1-minute step: step i covers
// (first + (i-1) minutes, first + i minutes].
type minutes struct {
	first   time.Time
	present []bool
	bad     []float64
	total   []float64
	// apportioned: bad is the window's error ratio times total, not
	// counted per minute (see Chart.BadApportioned).
	apportioned bool
}

func (m *minutes) end(i int) time.Time { return m.first.Add(time.Duration(i) * minute) }

// period is the span of steps i..j.
func (m *minutes) period(i, j int, loc *time.Location) Period {
	s, e := m.end(i).Add(-minute).In(loc), m.end(j).In(loc)
	return Period{Start: s, End: e, Duration: formatDuration(e.Sub(s))}
}

// runs returns the runs of at least minLen consecutive steps where in(i).
func (m *minutes) runs(minLen int, in func(i int) bool, loc *time.Location) []Period {
	out := []Period{}
	for i := 0; i < len(m.present); {
		if !in(i) {
			i++
			continue
		}
		j := i
		for j+1 < len(m.present) && in(j+1) {
			j++
		}
		if j-i+1 >= minLen {
			out = append(out, m.period(i, j, loc))
		}
		i = j + 1
	}
	return out
}

// gaps are runs of at least minGap steps without a sample.
func (m *minutes) gaps(loc *time.Location) []Period {
	return m.runs(minGap, func(i int) bool { return !m.present[i] }, loc)
}

// zeroTraffic are runs of at least MinZeroTraffic with samples and no
// event: the series were there and counted nothing.
func (m *minutes) zeroTraffic(loc *time.Location) []Period {
	return m.runs(int(MinZeroTraffic/minute), func(i int) bool { return m.present[i] && m.total[i] == 0 }, loc)
}

// chart sums the minutes into points of step minutes each, the last
// point ending at the last minute.
func (m *minutes) chart(step int, budget float64, loc *time.Location) []Point {
	n := len(m.present)
	points := []Point{}
	var cumBad, cumTotal float64
	// The first point may be shorter, so that the last ends at the end.
	for lo := 0; lo < n; {
		hi := lo + step
		if lo == 0 && n%step != 0 {
			hi = n % step
		}
		var bad, total float64
		for i := lo; i < hi; i++ {
			bad += m.bad[i]
			total += m.total[i]
		}
		cumBad += bad
		cumTotal += total
		p := Point{T: m.end(hi - 1).In(loc)}
		if total > 0 {
			p.SLI = ptr(1 - bad/total)
		}
		if cumTotal > 0 {
			p.BudgetRemaining = ptr(1 - cumBad/(budget*cumTotal))
		}
		points = append(points, p)
		lo = hi
	}
	return points
}

// chartStep is max(window / 1000, 1m), rounded up to whole minutes: at
// most 1000 points, far inside the 11,000 points per series of the query
// API.
func chartStep(window time.Duration) int {
	return max(1, int((window/1000+minute-1)/minute))
}

// increases turns the per-minute values of a sum of counters into the
// events of each minute. A decrease (a counter reset, or a series that went
// stale) counts as no event rather than a guess: these per-minute counts
// only draw charts and find gaps and quiet runs; attainment, budget,
// exhaustion, burn rates, contributors and months come from increase()
// over their whole range.
func increases(values []float64, has []bool) []float64 {
	out := make([]float64, len(values))
	prev, havePrev := 0.0, false
	for i, v := range values {
		if !has[i] {
			continue
		}
		if havePrev && v > prev {
			out[i] = v - prev
		}
		prev, havePrev = v, true
	}
	return out
}

// top returns the five largest contributors by bad events.
func top(bad map[string]float64, all float64) []Contributor {
	out := []Contributor{}
	for v, b := range bad {
		if b <= 0 {
			continue
		}
		c := Contributor{Value: v, Bad: b}
		if all > 0 {
			c.Share = b / all
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bad != out[j].Bad {
			return out[i].Bad > out[j].Bad
		}
		return out[i].Value < out[j].Value
	})
	if len(out) > 5 {
		out = out[:5]
	}
	return out
}

// formatDuration writes a duration as the SLO file does (30d, 3h, 1h30m),
// rounded to the second.
func formatDuration(d time.Duration) string { return slo.FormatDuration(d.Round(time.Second)) }
