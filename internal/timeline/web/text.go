package web

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// WriteText renders the episodes as the text of `explain`, newest
// generation first; now is the clock of the "ago" of each time. Every
// string from the cluster goes through Visible.
func WriteText(w io.Writer, eps []timeline.Episode, now time.Time) {
	slices.SortStableFunc(eps, func(a, b timeline.Episode) int {
		if c := cmp.Compare(b.Generation, a.Generation); c != 0 {
			return c
		}
		return b.Start.Compare(a.Start)
	})
	first := eps[0]
	fmt.Fprintf(w, "%s %s (uid %s): %d retained generation(s)\n", Visible(first.Kind), visibleName(first.Namespace, first.Name), Visible(first.UID), len(eps))
	for _, e := range eps {
		fmt.Fprintln(w)
		writeEpisode(w, e, now)
	}
}

func writeEpisode(w io.Writer, e timeline.Episode, now time.Time) {
	head := fmt.Sprintf("generation %d", e.Generation)
	if e.Target != 0 && e.Target != e.Generation {
		head += fmt.Sprintf(" (now judged against %d)", e.Target)
	}
	fmt.Fprintf(w, "%s, %s change\n", head, Visible(e.Change))
	state := Visible(e.State)
	if e.State == timeline.StateClosed {
		state += fmt.Sprintf(" (%s) after %s", Visible(e.Outcome), seconds(e.DurationSeconds))
	} else {
		state += fmt.Sprintf(" for %s", seconds(e.DurationSeconds))
	}
	if e.Recovered {
		state += ", recovered (found in flight after an exporter start or a watch gap; timed from the API-side write)"
	}
	fmt.Fprintf(w, "  state:    %s\n", state)
	if e.Stage != "" || e.Reason != "" {
		fmt.Fprintf(w, "  held by:  stage %s, reason %s\n", orDash(e.Stage), orDash(e.Reason))
	}
	start := fmt.Sprintf("%s (%s ago)", stamp(e.Start), ago(now.Sub(e.Start)))
	if !e.APIStart.IsZero() && !e.APIStart.Equal(e.Start) {
		start += ", API time " + stamp(e.APIStart)
	}
	fmt.Fprintf(w, "  started:  %s\n", start)
	if e.End != nil {
		fmt.Fprintf(w, "  ended:    %s (%s ago)\n", stamp(*e.End), ago(now.Sub(*e.End)))
	}
	if e.TraceID != "" {
		fmt.Fprintf(w, "  trace id: %s\n", Visible(e.TraceID))
	}
	if len(e.Stages) > 0 {
		fmt.Fprintln(w, "  stages:")
		width := 0
		for _, s := range e.Stages {
			width = max(width, len(Visible(s.Stage)))
		}
		for _, s := range e.Stages {
			var d string
			switch {
			case s.Reached && s.DurationSeconds != nil:
				d = seconds(*s.DurationSeconds)
			case s.Reached:
				d = "reached (before the exporter saw the episode)"
			default:
				d = "not reached"
			}
			fmt.Fprintf(w, "    %-*s  %s\n", width, Visible(s.Stage), d)
		}
	}
	if len(e.Entries) > 0 {
		fmt.Fprintln(w, "  entries:")
		entries := slices.Clone(e.Entries)
		slices.SortStableFunc(entries, func(a, b timeline.Entry) int { return a.Time.Compare(b.Time) })
		// Visible leaves no tab in a cell: the columns hold.
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, en := range entries {
			fmt.Fprintf(tw, "    %s\t%s\t%s\n", offset(en.Time.Sub(e.Start)), Visible(string(en.Type)), describeEntry(en))
		}
		_ = tw.Flush() // w's errors are the caller's to see (a closed stdout)
	}
	if e.EntriesDropped > 0 {
		// The store keeps the first and the last entries and drops the
		// ones between.
		fmt.Fprintf(w, "  (%d entries between the first and the last dropped at the exporter's --timelines.max-entries)\n", e.EntriesDropped)
	}
}

// describeEntry is an entry's line after its time and type.
func describeEntry(en timeline.Entry) string {
	var parts []string
	if en.Object != nil {
		parts = append(parts, Visible(en.Object.Kind)+" "+visibleName(en.Object.Namespace, en.Object.Name))
	}
	switch {
	case en.Type == timeline.EntryStage:
		parts = append(parts, Visible(en.Stage))
	case en.Stage != "" && en.Reason != "":
		parts = append(parts, "stage "+Visible(en.Stage)+", reason "+Visible(en.Reason))
	case en.Stage != "":
		parts = append(parts, "stage "+Visible(en.Stage))
	}
	if en.Generation != 0 {
		parts = append(parts, fmt.Sprintf("generation %d", en.Generation))
	}
	if en.Reason != "" && en.Stage == "" {
		parts = append(parts, Visible(en.Reason))
	}
	if en.Node != "" {
		parts = append(parts, "node "+Visible(en.Node))
	}
	if len(en.Managers) > 0 {
		ms := make([]string, len(en.Managers))
		for i, m := range en.Managers {
			ms[i] = Visible(m)
		}
		parts = append(parts, "managers "+strings.Join(ms, ", "))
	}
	if en.Count > 1 {
		parts = append(parts, fmt.Sprintf("(x%d)", en.Count))
	}
	if en.Controller != "" {
		parts = append(parts, "by "+Visible(en.Controller))
	}
	if en.APITime != nil {
		parts = append(parts, "API time "+stamp(*en.APITime))
	}
	line := strings.Join(parts, "  ")
	if en.Message != "" {
		line += ": " + Visible(en.Message)
	}
	return line
}

// visibleName is namespace/name, or name when cluster-scoped, each visible.
func visibleName(namespace, name string) string {
	if namespace == "" {
		return Visible(name)
	}
	return Visible(namespace) + "/" + Visible(name)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return Visible(s)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// seconds renders a duration in seconds as Go does, to the millisecond.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// ago is a coarse age: to the second.
func ago(d time.Duration) string {
	if d < 0 {
		return "0s" // the exporter's clock ahead of ours
	}
	return d.Round(time.Second).String()
}

// offset is an entry's time after the episode's start: +1.234s.
func offset(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d // an API time before the exporter saw the write
	}
	return fmt.Sprintf("%s%.3fs", sign, d.Seconds())
}
