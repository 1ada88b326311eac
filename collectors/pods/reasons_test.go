package pods

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// reasonRow is a row of a reason table in docs/: its first cell.
var reasonRow = regexp.MustCompile("^\\| `([a-z_]+)` \\|")

// docReasons returns the reasons of the first table after heading in a
// file of docs/, in their order.
func docReasons(t *testing.T, file, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", file))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/%s has no heading %q", file, heading)
	}
	var reasons []string
	for line := range strings.SplitSeq(section, "\n") {
		if m := reasonRow.FindStringSubmatch(line); m != nil {
			reasons = append(reasons, m[1])
		} else if len(reasons) > 0 {
			break // the end of the table
		}
	}
	return reasons
}

// The documented orders are NotReadyReason's (tracker.PodReasons, which a
// tracker test holds to the classifier): docs/pods.md's table of not-ready
// reasons ("the first that applies"), the pod reasons of docs/rollouts.md's
// stall reasons (whose order breaks a tie between them), and the reasons
// that the not-ready gauge's help text names.
func TestReasonOrderIsOneEverywhere(t *testing.T) {
	if got := docReasons(t, "pods.md", "## Not-ready pods and their reasons"); !slices.Equal(got, tracker.PodReasons) {
		t.Errorf("docs/pods.md lists the reasons %v, want tracker.PodReasons %v", got, tracker.PodReasons)
	}
	var podReasons []string
	for _, r := range docReasons(t, "rollouts.md", "## Stall reasons") {
		if r != tracker.PodOther && slices.Contains(tracker.PodReasons, r) {
			podReasons = append(podReasons, r)
		}
	}
	if want := tracker.PodReasons[:len(tracker.PodReasons)-1]; !slices.Equal(podReasons, want) {
		t.Errorf("docs/rollouts.md lists the pod reasons %v, want tracker.PodReasons %v (other is the rollout's own)", podReasons, want)
	}
	help := newMetrics(config.Default()).notReadyDesc.String()
	var named []string
	for _, w := range regexp.MustCompile(`[a-z_]+`).FindAllString(help, -1) {
		if slices.Contains(tracker.PodReasons, w) && !slices.Contains(named, w) {
			named = append(named, w)
		}
	}
	// The help text may name fewer reasons, never in another order.
	if !isSubsequence(named, tracker.PodReasons) {
		t.Errorf("the help of kube_convergence_pods_not_ready names %v, out of the order of tracker.PodReasons %v", named, tracker.PodReasons)
	}
}

func isSubsequence(sub, of []string) bool {
	i := 0
	for _, s := range of {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}
