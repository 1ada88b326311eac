package slo

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
)

// Day is the unit of slo:time_period:days and of the "30d" period names.
const Day = 24 * time.Hour

// Window is one multi-window multi-burn-rate alert condition: the error
// ratio over both Long and Short must exceed Factor times the error budget.
// Long measures how much budget is gone; Short makes the alert stop soon
// after the burning stops (SRE workbook, "Alerting on SLOs", approach 6).
type Window struct {
	Long, Short time.Duration
	Factor      float64
}

// The SRE workbook's pairs, defined for a 30-day period: a page when 2% of
// the budget burns in 1 h (14.4 x 1h / 720h) or 5% in 6 h (6 x 6h / 720h),
// a ticket when 10% burns in 1 d (3 x 24h / 720h) or in 3 d (1 x 72h / 720h).
//
// The factors are kept as they are for every period; only the share of the
// budget they stand for changes (BudgetShare), and a pair whose share is
// above 100% is dropped (Kept). Scaling the factors instead would make a
// 1-day SLO page at 0.6x, i.e. while it is being met.
func DefaultPageWindows() []Window {
	return []Window{{Long: time.Hour, Short: 5 * time.Minute, Factor: 14.4}, {Long: 6 * time.Hour, Short: 30 * time.Minute, Factor: 6}}
}

// DefaultTicketWindows: see DefaultPageWindows.
func DefaultTicketWindows() []Window {
	return []Window{{Long: Day, Short: 2 * time.Hour, Factor: 3}, {Long: 3 * Day, Short: 6 * time.Hour, Factor: 1}}
}

// BudgetShare is the fraction of the period's error budget that is spent
// when the error ratio stays at the alert threshold (Factor x budget) for
// the whole long window: Factor x Long / period.
func (w Window) BudgetShare(period time.Duration) float64 {
	return w.Factor * w.Long.Seconds() / period.Seconds()
}

// Kept reports whether the pair is used for an SLO of this period. With a
// share above 100%, the alert can only fire once more than the period's
// whole budget is gone within the long window (with uniform traffic), so it
// is a post-mortem, not a warning; and a long window longer than the period
// (the 3d ticket of a 1-day SLO: 300%) reads errors that no longer count
// against the period, so it could fire while the SLO is met. That is the one
// rule applied to every period; see docs/slo.md for the table.
func (w Window) Kept(period time.Duration) bool {
	// 1e-9: 14.4 x 1h / 14.4h must count as exactly 100%.
	return w.BudgetShare(period) <= 1+1e-9
}

func (w Window) String() string {
	return fmt.Sprintf("%s/%s at %sx", FormatDuration(w.Long), FormatDuration(w.Short), strconv.FormatFloat(w.Factor, 'g', -1, 64))
}

// SLIWindows are the windows every SLO records as slo:sli_error:ratio_rate<w>
// (Sloth's set, so that its dashboards keep working), whether or not an
// alert uses them.
func SLIWindows() []time.Duration {
	return []time.Duration{5 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, Day, 3 * Day}
}

// baseWindow is the window of the only rules that read the raw metrics
// (slo:sli_bad:rate5m, slo:sli_total:rate5m); every longer window is an
// average of those records. It is also the shortest window an alert may use.
const baseWindow = 5 * time.Minute

// FormatDuration writes a duration the way Prometheus and Sloth name
// windows: 5m, 1h, 1d, 30d, 1w is written 7d (Sloth's ratio_rate names use
// days).
func FormatDuration(d time.Duration) string {
	if d >= Day && d%Day == 0 {
		return strconv.FormatInt(int64(d/Day), 10) + "d"
	}
	return model.Duration(d).String()
}

// ParseDuration reads a Prometheus duration ("30d", "28d", "1w", "90m",
// "1h30m"), which unlike time.ParseDuration knows days and weeks.
func ParseDuration(s string) (time.Duration, error) {
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 30d, 7d or 12h: %w", err)
	}
	return time.Duration(d), nil
}
