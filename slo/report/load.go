package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// LoadFile reads the SLO file at path ("-": stdin) as `slo validate`
// does, with one difference: a problem that concerns only rule generation
// (issue 26) does not refuse the file. A report needs no alert windows: a
// 1d period, whose default ticket pairs would each spend more than the
// budget, leaves the ticket tier without a pair, which `slo validate`
// refuses (the tier would never alert) and the report only has no ticket
// burn rates for. Such problems come back as warnings (file:line as `slo
// validate` prints them, and what the report does instead); any other
// problem fails with the errors of `slo validate`, unchanged.
//
// The slo package refuses the whole file on any error, so the tiers
// concerned are disabled in the YAML (`<tier>: {enabled: false}`; in
// OpenSLO, in the alerting annotation) and the file is parsed again.
// Then slo.Generate's errors, all about rules, are warnings too.
func LoadFile(path string, stdin io.Reader) (*slo.File, []string, error) {
	name, data, err := readSLOFile(path, stdin)
	if err != nil {
		return nil, nil, err
	}
	f, err := slo.Parse(name, data)
	var warnings []string
	if err != nil {
		first := err
		// Each round may bring the defaults a removed block hid (an
		// undecodable OpenSLO alerting annotation), so a few rounds.
		for round := 0; err != nil; round++ {
			var w []string
			var ok bool
			if data, w, ok = withoutRuleProblems(data, err, round == 0); !ok || round == 3 {
				return nil, nil, first
			}
			warnings = append(warnings, w...)
			f, err = slo.Parse(name, data)
		}
	}
	if _, err := slo.Generate(f); err != nil {
		warnings = append(warnings, err.Error()+"; the report needs no rules and goes on")
	}
	return f, warnings, nil
}

// readSLOFile reads as slo.Load does, with its messages.
func readSLOFile(path string, stdin io.Reader) (string, []byte, error) {
	var (
		b   []byte
		err error
	)
	switch {
	case path == "-" && stdin == nil:
		return "", nil, errors.New("reading SLO file: no standard input")
	case path == "-":
		path = "<stdin>"
		b, err = io.ReadAll(stdin)
	default:
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", nil, fmt.Errorf("reading SLO file: %w", err)
	}
	return path, b, nil
}

// The messages of slo's validator that concern only the rules: those of
// a tier (page or ticket: its windows, for, minEvents, labels), of the
// alerting block (alert name, runbook URL, labels, annotations,
// noEvents), and OpenSLO's alerting annotation and alertPolicies.
var (
	tierProblem          = regexp.MustCompile(`^slo "([^"]*)": (page|ticket): `)
	alertingProblem      = regexp.MustCompile(`^slo "([^"]*)": alerting: `)
	annotationProblem    = regexp.MustCompile(`^SLO "([^"]*)": annotation ` + regexp.QuoteMeta(slo.AlertingAnnotation) + `: `)
	alertPoliciesProblem = regexp.MustCompile(`^SLO "([^"]*)": alertPolicies are not supported`)
)

// ruleEdits are the changes to one SLO's YAML that remove its rule
// problems.
type ruleEdits struct {
	tiers         []string // disable
	alertingExtra bool     // drop the alerting keys other than page and ticket
	annotation    bool     // drop OpenSLO's alerting annotation
	alertPolicies bool     // drop OpenSLO's spec.alertPolicies
}

// withoutRuleProblems returns data with the rule problems of err removed
// and a warning for each; ok is false when err holds any other problem
// (or the YAML cannot be edited). withLines keeps the file:line of the
// messages: only the first round's lines are those of the user's file.
func withoutRuleProblems(data []byte, err error, withLines bool) (out []byte, warnings []string, ok bool) {
	var errs []error
	if j, isJoin := err.(interface{ Unwrap() []error }); isJoin {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	edits := map[string]*ruleEdits{}
	var order []string
	edit := func(name string) *ruleEdits {
		if edits[name] == nil {
			edits[name] = &ruleEdits{}
			order = append(order, name)
		}
		return edits[name]
	}
	for _, e := range errs {
		se, isSLO := errors.AsType[*slo.Error](e)
		if !isSLO {
			return nil, nil, false
		}
		var instead string
		switch m := se.Msg; {
		case tierProblem.MatchString(m):
			g := tierProblem.FindStringSubmatch(m)
			if ed := edit(g[1]); !slices.Contains(ed.tiers, g[2]) {
				ed.tiers = append(ed.tiers, g[2])
			}
			instead = "without the " + g[2] + " tier's burn rates"
		case alertingProblem.MatchString(m):
			edit(alertingProblem.FindStringSubmatch(m)[1]).alertingExtra = true
			instead = "without it"
		case annotationProblem.MatchString(m):
			edit(annotationProblem.FindStringSubmatch(m)[1]).annotation = true
			instead = "with the default tiers"
		case alertPoliciesProblem.MatchString(m):
			edit(alertPoliciesProblem.FindStringSubmatch(m)[1]).alertPolicies = true
			instead = "without them"
		default:
			return nil, nil, false
		}
		msg := se.Error()
		if !withLines {
			msg = (&slo.Error{File: se.File, Msg: se.Msg}).Error()
		}
		warnings = append(warnings, msg+"; a report needs no alert rules and goes on "+instead)
	}
	docs, err := decodeDocuments(data)
	if err != nil {
		return nil, nil, false
	}
	for _, name := range order {
		if !applyRuleEdits(docs, name, edits[name]) {
			return nil, nil, false
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, nil, false
		}
	}
	if err := enc.Close(); err != nil {
		return nil, nil, false
	}
	return b.Bytes(), warnings, true
}

// decodeDocuments returns the file's non-empty documents.
func decodeDocuments(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) == 1 && n.Content[0].Kind == yaml.MappingNode {
			docs = append(docs, &n)
		}
	}
}

// applyRuleEdits finds the SLO named name, in this project's format (an
// item of slos) or OpenSLO (a kind SLO document whose metadata.name is
// name, or for an SLO of several objectives the longest that name
// starts with followed by "-"), and edits it.
func applyRuleEdits(docs []*yaml.Node, name string, e *ruleEdits) bool {
	var openSLO *yaml.Node
	matched := ""
	for _, d := range docs {
		root := d.Content[0]
		if slos := mapGet(root, "slos"); slos != nil && slos.Kind == yaml.SequenceNode {
			for _, s := range slos.Content {
				if n := mapGet(s, "name"); n != nil && n.Value == name {
					return editAlerting(ensureMap(s, "alerting"), e)
				}
			}
		}
		if k := mapGet(root, "kind"); k == nil || k.Value != "SLO" {
			continue
		}
		n := mapGet(mapGet(root, "metadata"), "name")
		if n == nil || n.Value == "" || (n.Value != name && !strings.HasPrefix(name, n.Value+"-")) {
			continue
		}
		// The exact name, else the longest prefix.
		if matched != name && (n.Value == name || len(n.Value) > len(matched)) {
			openSLO, matched = root, n.Value
		}
	}
	if openSLO == nil {
		return false
	}
	if e.alertPolicies {
		mapDel(mapGet(openSLO, "spec"), "alertPolicies")
	}
	annotations := ensureMap(ensureMap(openSLO, "metadata"), "annotations")
	if e.annotation {
		mapDel(annotations, slo.AlertingAnnotation)
	}
	if len(e.tiers) == 0 && !e.alertingExtra {
		return true
	}
	// The annotation holds the alerting block as YAML text.
	alerting := &yaml.Node{Kind: yaml.MappingNode}
	if a := mapGet(annotations, slo.AlertingAnnotation); a != nil && strings.TrimSpace(a.Value) != "" {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(a.Value), &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
			return false
		}
		alerting = doc.Content[0]
	}
	if !editAlerting(alerting, e) {
		return false
	}
	text, err := yaml.Marshal(alerting)
	if err != nil {
		return false
	}
	mapSet(annotations, slo.AlertingAnnotation, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: string(text), Style: yaml.LiteralStyle})
	return true
}

// editAlerting disables the tiers and drops the extra keys of an
// alerting mapping.
func editAlerting(a *yaml.Node, e *ruleEdits) bool {
	if a == nil || a.Kind != yaml.MappingNode {
		return false
	}
	if e.alertingExtra {
		for i := 0; i+1 < len(a.Content); {
			if k := a.Content[i].Value; k != slo.TierPage && k != slo.TierTicket {
				a.Content = slices.Delete(a.Content, i, i+2)
				continue
			}
			i += 2
		}
	}
	for _, t := range e.tiers {
		mapSet(a, t, &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "enabled"},
			{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "false"},
		}})
	}
	return true
}

func mapGet(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func mapSet(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

func mapDel(m *yaml.Node, key string) {
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
	}
}

// ensureMap returns m's mapping at key, made when absent or null.
func ensureMap(m *yaml.Node, key string) *yaml.Node {
	if v := mapGet(m, key); v != nil && (v.Kind == yaml.MappingNode || v.Tag != "!!null") {
		return v
	}
	v := &yaml.Node{Kind: yaml.MappingNode}
	if m != nil && m.Kind == yaml.MappingNode {
		mapSet(m, key, v)
	}
	return v
}
