package slo

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// sreWorkbookPairs is the SRE workbook's table for a 30-day SLO, written
// out here again in hours so the test does not trust the package's copy.
var sreWorkbookPairs = []struct {
	tier               string
	longH, shortMinute float64
	factor             float64
}{
	{TierPage, 1, 5, 14.4},
	{TierPage, 6, 30, 6},
	{TierTicket, 24, 120, 3},
	{TierTicket, 72, 360, 1},
}

func pairName(longH, shortMin float64) string {
	name := func(minutes float64) string {
		switch {
		case minutes >= 1440 && int(minutes)%1440 == 0:
			return fmt.Sprintf("%dd", int(minutes)/1440)
		case minutes >= 60 && int(minutes)%60 == 0:
			return fmt.Sprintf("%dh", int(minutes)/60)
		}
		return fmt.Sprintf("%dm", int(minutes))
	}
	return name(longH*60) + "/" + name(shortMin)
}

// TestKeptAndDroppedPairsPerPeriod generates the rules of one SLO for 30,
// 28, 7 and 1 days and checks which window pairs the alerts use against
// the budget shares computed here (factor x long window / period <= 100%)
// and against the table of docs/slo.md.
func TestKeptAndDroppedPairsPerPeriod(t *testing.T) {
	for _, tc := range []struct {
		period      string
		periodHours float64
		// The table in docs/slo.md.
		wantPage, wantTicket []string
	}{
		{"30d", 720, []string{"1h/5m", "6h/30m"}, []string{"1d/2h", "3d/6h"}},
		{"28d", 672, []string{"1h/5m", "6h/30m"}, []string{"1d/2h", "3d/6h"}},
		{"7d", 168, []string{"1h/5m", "6h/30m"}, []string{"1d/2h", "3d/6h"}},
		{"1d", 24, []string{"1h/5m"}, nil},
	} {
		t.Run(tc.period, func(t *testing.T) {
			// Independently: the share of the budget each pair spends.
			var computedPage, computedTicket []string
			for _, p := range sreWorkbookPairs {
				share := p.factor * p.longH / tc.periodHours
				if share > 1 {
					continue
				}
				if p.tier == TierPage {
					computedPage = append(computedPage, pairName(p.longH, p.shortMinute))
				} else {
					computedTicket = append(computedTicket, pairName(p.longH, p.shortMinute))
				}
			}
			if !slices.Equal(computedPage, tc.wantPage) || !slices.Equal(computedTicket, tc.wantTicket) {
				t.Fatalf("the docs table disagrees with the arithmetic: computed page %v ticket %v", computedPage, computedTicket)
			}

			doc := fmt.Sprintf(latencySLO, tc.period)
			if tc.wantTicket == nil {
				// No ticket pair left with the defaults: an error, not a
				// ticket tier that silently never fires.
				if _, err := Parse("test.yaml", []byte(doc)); err == nil || !strings.Contains(err.Error(), "ticket: no window pair is left for a "+tc.period+" period") {
					t.Errorf("a %s period with the default ticket tier: got %v, want the no-window-left error", tc.period, err)
				}
				doc += "    alerting:\n      ticket: {enabled: false}\n"
			}
			f := mustParse(t, doc)
			rf, err := Generate(f)
			if err != nil {
				t.Fatal(err)
			}
			page, ticket := alertPairs(t, rf)
			if !slices.Equal(page, computedPage) {
				t.Errorf("page pairs %v, want %v", page, computedPage)
			}
			if !slices.Equal(ticket, computedTicket) {
				t.Errorf("ticket pairs %v, want %v", ticket, computedTicket)
			}

			// Dropped pairs are reported by Notes, with their share.
			notes := strings.Join(f.Notes(), "\n")
			for _, p := range sreWorkbookPairs {
				name := pairName(p.longH, p.shortMinute)
				if p.tier != TierPage && tc.wantTicket == nil {
					continue // the ticket tier is disabled
				}
				dropped := strings.Contains(notes, " "+name+" at ")
				if kept := slices.Contains(page, name) || slices.Contains(ticket, name); kept == dropped {
					t.Errorf("pair %s: kept=%v but noted as dropped=%v:\n%s", name, kept, dropped, notes)
				}
			}
			if tc.period == "1d" {
				for _, want := range []string{"6h/30m at 6x dropped: it would spend 150%"} {
					if !strings.Contains(notes, want) {
						t.Errorf("notes lack %q:\n%s", want, notes)
					}
				}
			}
		})
	}
}

var alertWindow = regexp.MustCompile(`slo:sli_error:ratio_rate(\w+)\{`)

// alertPairs reads the long/short pairs back from the generated alert
// expressions: each pair is a parenthesised block naming two windows.
func alertPairs(t *testing.T, rf *RuleFile) (page, ticket []string) {
	t.Helper()
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !strings.Contains(r.Expr, "ratio_rate") {
				continue // the no-events ticket
			}
			var pairs []string
			for _, block := range strings.Split(r.Expr, "\n  or\n") {
				ws := alertWindow.FindAllStringSubmatch(block, -1)
				if len(ws) != 2 {
					t.Fatalf("alert %s: a pair block names %d windows:\n%s", r.Alert, len(ws), block)
				}
				pairs = append(pairs, ws[0][1]+"/"+ws[1][1])
			}
			switch r.Labels["slo_tier"] {
			case TierPage:
				page = pairs
			case TierTicket:
				ticket = pairs
			default:
				t.Fatalf("alert %s without slo_tier: %v", r.Alert, r.Labels)
			}
		}
	}
	return page, ticket
}

func TestBudgetShare(t *testing.T) {
	for _, tc := range []struct {
		w      Window
		period time.Duration
		share  float64
		kept   bool
	}{
		{Window{time.Hour, 5 * time.Minute, 14.4}, 30 * Day, 0.02, true},
		{Window{6 * time.Hour, 30 * time.Minute, 6}, 30 * Day, 0.05, true},
		{Window{Day, 2 * time.Hour, 3}, 30 * Day, 0.1, true},
		{Window{3 * Day, 6 * time.Hour, 1}, 30 * Day, 0.1, true},
		{Window{time.Hour, 5 * time.Minute, 14.4}, Day, 0.6, true},
		{Window{6 * time.Hour, 30 * time.Minute, 6}, Day, 1.5, false},
		// Exactly 100%: kept (the rule is "above 100%").
		{Window{time.Hour, 5 * time.Minute, 14.4}, 14*time.Hour + 24*time.Minute, 1, true},
	} {
		if got := tc.w.BudgetShare(tc.period); fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", tc.share) {
			t.Errorf("%s over %s: share %v, want %v", tc.w, FormatDuration(tc.period), got, tc.share)
		}
		if got := tc.w.Kept(tc.period); got != tc.kept {
			t.Errorf("%s over %s: kept %v, want %v", tc.w, FormatDuration(tc.period), got, tc.kept)
		}
	}
}

func TestFormatAndParseDuration(t *testing.T) {
	for s, want := range map[string]time.Duration{"5m": 5 * time.Minute, "1h": time.Hour, "1d": Day, "28d": 28 * Day, "1w": 7 * Day, "90m": 90 * time.Minute} {
		d, err := ParseDuration(s)
		if err != nil || d != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", s, d, err, want)
		}
	}
	for d, want := range map[time.Duration]string{5 * time.Minute: "5m", 2 * time.Hour: "2h", Day: "1d", 7 * Day: "7d", 30 * Day: "30d", 90 * time.Minute: "1h30m"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
	if _, err := ParseDuration("1M"); err == nil {
		t.Error(`ParseDuration("1M") succeeded: months have no fixed length`)
	}
}
