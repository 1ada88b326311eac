package report

import (
	"sort"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// minute is the resolution of gaps, zero traffic and charts: the SLI is
// read at 1-minute steps.
const minute = time.Minute

// gapSteps is the fewest consecutive 1-minute steps without a sample that
// make a gap at a scrape interval: more than two intervals without a
// sample, ceil(2 x interval / 1m), and at least 2. One missed scrape
// leaves 2 intervals between samples and is not a gap; two are. At 1m
// (and below, where a minute cannot see a single miss) this is the old
// rule, one missing minute is a late scrape and two are a gap. At 3m the
// rule of two minutes found a gap between every two samples: 14,400 rows
// in 30 days (issue 26). The rule evaluation interval plays no part: the
// report reads the raw series, not recorded ones.
func gapSteps(interval time.Duration) int {
	return max(2, int((2*interval+minute-1)/minute))
}

// MaxGapRows is the most gaps a report lists: the longest, in time
// order, and "N more" for the others. A scrape interval misjudged (or a
// target scraped now and then) must not make a report of thousands of
// rows; ten is more than a healthy month has.
const MaxGapRows = 10

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

// recentWindow is the window of the recent bad-event rate r of the
// exhaustion projection: the last day, as the 1d burn rate the ticket
// tier reads.
const recentWindow = slo.Day

// exhaustionOf projects when the window's remaining budget runs out at the
// recent bad-event rate (issue 26): B = budget x total events of the
// window - bad events of the window (Budget.Remaining), r = bad events of
// the last day per day; exhausted when B <= 0; "not at this rate" when
// r is 0 or B / r is not shorter than the window (a budget that lasts a
// window at this rate lasts for good: a window later every event now in
// it has left it, and a 1x burn rate spends a window's budget in exactly
// one window); else at + B / r. Counted in events, not ratios: the ratio
// formula (remaining ratio x window / 1d burn rate) divides by the last
// day's error ratio, which says nothing of how many bad events a day
// brings when the last day's traffic is not the window's average.
func exhaustionOf(at time.Time, window time.Duration, b Budget, recent Events, budget float64) Exhaustion {
	x := Exhaustion{
		BurnRate1d: burnRate(recent, budget), RecentWindow: formatDuration(recentWindow), RecentBad: recent.Bad,
		Horizon: at.Add(window),
	}
	switch {
	case b.RemainingRatio == nil:
		x.State = ExhaustionNoEvents
		return x
	case b.Remaining <= 0:
		x.State = ExhaustionExhausted
		return x
	case recent.Bad <= 0:
		x.State = ExhaustionNever
		return x
	}
	d := b.Remaining / recent.Bad * float64(recentWindow)
	if d >= float64(window) {
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

// inGap marks the steps of the runs of at least minSteps steps without a
// sample.
func (m *minutes) inGap(minSteps int) []bool {
	gap := make([]bool, len(m.present))
	for i := 0; i < len(m.present); {
		if m.present[i] {
			i++
			continue
		}
		j := i
		for j < len(m.present) && !m.present[j] {
			j++
		}
		if j-i >= minSteps {
			for k := i; k < j; k++ {
				gap[k] = true
			}
		}
		i = j
	}
	return gap
}

// gaps are runs of at least minSteps steps without a sample, each one
// row however many steps it spans.
func (m *minutes) gaps(minSteps int, loc *time.Location) []Period {
	gap := m.inGap(minSteps)
	return m.runs(minSteps, func(i int) bool { return gap[i] }, loc)
}

// zeroTraffic are runs of at least MinZeroTraffic outside gaps without an
// event: the series were there and counted nothing. A step between two
// samples that is no gap (at a 3m scrape interval, two minutes of three)
// is part of the run.
func (m *minutes) zeroTraffic(minSteps int, loc *time.Location) []Period {
	gap := m.inGap(minSteps)
	return m.runs(int(MinZeroTraffic/minute), func(i int) bool { return !gap[i] && m.total[i] == 0 }, loc)
}

// boundGaps keeps the max longest gaps (the earlier of two as long), in
// time order, and returns how many it left out.
func boundGaps(gaps []Period, maxRows int) ([]Period, int) {
	if len(gaps) <= maxRows {
		return gaps, 0
	}
	idx := make([]int, len(gaps))
	for i := range idx {
		idx[i] = i
	}
	length := func(i int) time.Duration { return gaps[i].End.Sub(gaps[i].Start) }
	sort.SliceStable(idx, func(a, b int) bool { return length(idx[a]) > length(idx[b]) })
	idx = idx[:maxRows]
	sort.Ints(idx)
	kept := make([]Period, len(idx))
	for k, i := range idx {
		kept[k] = gaps[i]
	}
	return kept, len(gaps) - maxRows
}

// sampleSpacing is the median distance between consecutive steps with a
// sample: the scrape interval, at minute resolution, when neither
// --scrape-interval nor the targets API gives it (a gap moves a median
// by one spacing at most). 0 with fewer than two such steps.
func (m *minutes) sampleSpacing() time.Duration {
	var spacings []int
	last := -1
	for i, p := range m.present {
		if !p {
			continue
		}
		if last >= 0 {
			spacings = append(spacings, i-last)
		}
		last = i
	}
	if len(spacings) == 0 {
		return 0
	}
	sort.Ints(spacings)
	return time.Duration(spacings[len(spacings)/2]) * minute
}

// budgetSpentAt is when an exhausted budget ran out: the end of the
// first step by which the window's bad events reached the window's
// budget, allowed. The steps' bad events are the increases between
// minutes, which increase() over the window extrapolates a little
// further; they are scaled to windowBad, so that the last bad minute
// holds the whole count. nil without a bad minute.
func (m *minutes) budgetSpentAt(allowed, windowBad float64, loc *time.Location) *time.Time {
	var sum float64
	for _, b := range m.bad {
		sum += b
	}
	if sum <= 0 || windowBad <= 0 {
		return nil
	}
	need := allowed / windowBad * sum
	var cum float64
	for i, b := range m.bad {
		cum += b
		// The last bad minute holds it whatever the float rounding.
		if b > 0 && (cum >= need || cum >= sum) {
			return ptr(m.end(i).In(loc))
		}
	}
	return nil
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
// only draw charts, find gaps and quiet runs, and place the minute an
// exhausted budget ran out (scaled to the window's count); attainment,
// budget, the exhaustion date, burn rates, contributors and months come
// from increase() over their whole range.
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
