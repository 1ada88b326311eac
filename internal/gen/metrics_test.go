package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
)

// detailSection is a section of docs/metrics.md: one per metric, titled
// by its name.
var detailSection = regexp.MustCompile("(?m)^### `(kube_convergence_[a-z_]+)`$")

// Every registered metric has one section in docs/metrics.md, the target of
// its link in the reference, and every section is a registered metric.
func TestEveryMetricHasItsDetail(t *testing.T) {
	ms, err := registeredMetrics()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(metricDetail)))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]int{}
	for _, m := range detailSection.FindAllStringSubmatch(string(b), -1) {
		sections[m[1]]++
	}
	for _, m := range ms {
		if n := sections[m.Name]; n != 1 {
			t.Errorf("%s: %d sections in %s, want 1", m.Name, n, metricDetail)
		}
		if want := metricDetail + "#" + m.Name; m.Doc != want {
			t.Errorf("%s links to %q, want %q", m.Name, m.Doc, want)
		}
		delete(sections, m.Name)
	}
	for name := range sections {
		t.Errorf("%s: a section of %s, and not a registered metric", name, metricDetail)
	}
}

// secondSentence is a full stop followed by the start of another sentence.
var secondSentence = regexp.MustCompile(`\. [A-Z0-9]`)

// Every help is one sentence of at most metric.MaxHelp runes: what is
// counted or measured. The rest belongs in docs/metrics.md.
func TestEveryHelpIsOneShortSentence(t *testing.T) {
	ms, err := registeredMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if n := utf8.RuneCountInString(m.Help); n > metric.MaxHelp {
			t.Errorf("%s: help of %d runes, more than %d: %s", m.Name, n, metric.MaxHelp, m.Help)
		}
		if !strings.HasSuffix(m.Help, ".") || secondSentence.MatchString(m.Help) {
			t.Errorf("%s: help is not one sentence: %s", m.Name, m.Help)
		}
	}
}

// markdownLink is a relative link to a Markdown file, with its anchor.
var markdownLink = regexp.MustCompile(`\]\(([^)#:]+\.md)(?:#([^)]*))?\)`)

// The links of docs/metrics.md lead to a file and a section that exist.
func TestMetricDetailLinksResolve(t *testing.T) {
	page := filepath.Join("..", "..", filepath.FromSlash(metricDetail))
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range markdownLink.FindAllStringSubmatch(string(b), -1) {
		target := filepath.Join(filepath.Dir(page), filepath.FromSlash(m[1]))
		doc, err := os.ReadFile(target)
		if err != nil {
			t.Errorf("%s: link to %s: %v", metricDetail, m[1], err)
			continue
		}
		if m[2] != "" && !headingAnchors(string(doc))[m[2]] {
			t.Errorf("%s: link to %s#%s: no such section", metricDetail, m[1], m[2])
		}
	}
}

// headingAnchors are the anchors GitHub gives a page's headings: lower
// case, punctuation dropped, spaces as dashes.
func headingAnchors(doc string) map[string]bool {
	punct := regexp.MustCompile(`[^a-z0-9 _-]`)
	out := map[string]bool{}
	inCode := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		out[strings.ReplaceAll(punct.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}
