package slo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Load reads and validates the SLO file at path; "-" reads stdin. Errors
// name the file and line (file:line: message), one per line.
func Load(path string, stdin io.Reader) (*File, error) {
	var (
		b   []byte
		err error
	)
	switch {
	case path == "-" && stdin == nil:
		return nil, errors.New("reading SLO file: no standard input")
	case path == "-":
		path = "<stdin>"
		b, err = io.ReadAll(stdin)
	default:
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading SLO file: %w", err)
	}
	return Parse(path, b)
}

// Parse reads and validates an SLO file named name (for messages): this
// project's format, or a stream of OpenSLO v1 documents (recognised by
// apiVersion: openslo/v1 in the first document).
//
// Decoding is strict: an unknown key is an error with its line, because a
// misspelt key that silently falls back to a default is how an SLO ends up
// measuring something else.
func Parse(name string, data []byte) (*File, error) {
	docs, err := yamlDocuments(name, data)
	if err != nil {
		return nil, err
	}
	var first *yaml.Node
	for _, d := range docs {
		if !emptyDocument(d) {
			first = d
			break
		}
	}
	if first == nil {
		return nil, &Error{File: name, Msg: "empty SLO file"}
	}
	if apiVersion(first) == openSLOVersion {
		return parseOpenSLO(name, data, docs)
	}
	return parseNative(name, data, docs)
}

// yamlDocuments is the first pass: every document as a node tree (empty
// ones included, to stay in step with a second, typed pass), which gives
// validation errors their line numbers.
func yamlDocuments(name string, data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, yamlError(name, err)
		}
		docs = append(docs, &n)
	}
}

// emptyDocument: "---" alone, or a document holding only comments or null.
func emptyDocument(doc *yaml.Node) bool {
	return len(doc.Content) == 0 || (doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null")
}

// apiVersion returns the apiVersion key of a document, "" if none.
func apiVersion(doc *yaml.Node) string {
	if n := lookup(doc, "apiVersion"); n != nil && n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return ""
}

// NativeVersion is the apiVersion of this project's format (optional in
// the file).
const NativeVersion = "kube-convergence.io/slo/v1"

// The native format. Pointer fields tell "unset" (take the default) from a
// zero value.
type fileYAML struct {
	APIVersion string    `yaml:"apiVersion"`
	Service    string    `yaml:"service"`
	SLOs       []sloYAML `yaml:"slos"`
}

type sloYAML struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	Labels      map[string]string `yaml:"labels"`
	Objective   *decimal          `yaml:"objective"`
	Period      *durationYAML     `yaml:"period"`
	SLI         *sliYAML          `yaml:"sli"`
	Alerting    *alertingYAML     `yaml:"alerting"`
}

type sliYAML struct {
	Latency     *latencyYAML     `yaml:"latency"`
	GoodMinutes *goodMinutesYAML `yaml:"goodMinutes"`
	Ratio       *ratioYAML       `yaml:"ratio"`
}

type latencyYAML struct {
	Metric    string                `yaml:"metric"`
	Threshold *number               `yaml:"threshold"`
	Match     map[string]valuesYAML `yaml:"match"`
	Scope     map[string]valuesYAML `yaml:"scope"`
}

type goodMinutesYAML struct {
	BadWhen   string `yaml:"badWhen"`
	CountWhen string `yaml:"countWhen"`
}

type ratioYAML struct {
	ErrorQuery string `yaml:"errorQuery"`
	TotalQuery string `yaml:"totalQuery"`
}

type alertingYAML struct {
	Name        string            `yaml:"name"`
	RunbookURL  string            `yaml:"runbookURL"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
	Page        *tierYAML         `yaml:"page"`
	Ticket      *tierYAML         `yaml:"ticket"`
	NoEvents    *noEventsYAML     `yaml:"noEvents"`
}

type noEventsYAML struct {
	Enabled *bool         `yaml:"enabled"`
	For     *durationYAML `yaml:"for"`
}

type tierYAML struct {
	Enabled   *bool             `yaml:"enabled"`
	For       *durationYAML     `yaml:"for"`
	MinEvents *int              `yaml:"minEvents"`
	Labels    map[string]string `yaml:"labels"`
	Windows   []windowYAML      `yaml:"windows"`
}

type windowYAML struct {
	Long   *durationYAML `yaml:"long"`
	Short  *durationYAML `yaml:"short"`
	Factor *number       `yaml:"factor"`
}

// decimal is a number kept exactly as written (objectives: 0.999 must give
// a budget of exactly 0.001).
type decimal struct{ r *big.Rat }

func (d *decimal) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if _, err := strconv.ParseFloat(n.Value, 64); err == nil {
			if r, ok := new(big.Rat).SetString(n.Value); ok {
				d.r = r
				return nil
			}
		}
	}
	return typeError(n, "want a number such as 0.99, got %q", n.Value)
}

// number is a float64 that may also be written as a string ("5.0", the way
// Prometheus shows le).
type number struct{ v float64 }

func (x *number) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if v, err := strconv.ParseFloat(n.Value, 64); err == nil {
			x.v = v
			return nil
		}
	}
	return typeError(n, "want a number, got %q", n.Value)
}

// durationYAML is a Prometheus duration: 30d, 28d, 1w, 90m.
type durationYAML struct{ d time.Duration }

func (x *durationYAML) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if d, err := ParseDuration(n.Value); err == nil && d > 0 {
			x.d = d
			return nil
		}
	}
	return typeError(n, "want a positive duration such as 30d, 7d or 12h, got %q", n.Value)
}

// valuesYAML is one label value or a list of them.
type valuesYAML []string

func (v *valuesYAML) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*v = []string{n.Value}
		return nil
	case yaml.SequenceNode:
		var out []string
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return typeError(c, "want a label value")
			}
			out = append(out, c.Value)
		}
		if len(out) == 0 {
			return typeError(n, "want at least one label value")
		}
		*v = out
		return nil
	}
	return typeError(n, "want a label value or a list of them")
}

// typeError makes yaml.v3 collect the error with the others instead of
// stopping at the first one.
func typeError(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, args...)}}
}

func parseNative(name string, data []byte, all []*yaml.Node) (*File, error) {
	var docs []*yaml.Node
	for _, d := range all {
		if !emptyDocument(d) {
			docs = append(docs, d)
		}
	}
	if len(docs) > 1 {
		return nil, &Error{File: name, Line: docs[1].Line, Msg: "more than one YAML document: one SLO file has one document with a list of slos (several documents are only read as OpenSLO, apiVersion: openslo/v1)"}
	}
	// The typed, strict pass over the same stream, in step with the first.
	var fy fileYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	for _, d := range all {
		var target any = &yaml.Node{}
		if d == docs[0] {
			target = &fy
		}
		if err := dec.Decode(target); err != nil && !errors.Is(err, io.EOF) {
			return nil, yamlError(name, err)
		}
	}
	v := &validator{file: name, doc: docs[0]}
	f := &File{Name: name}
	if fy.APIVersion != "" && fy.APIVersion != NativeVersion {
		v.errorf(v.line("apiVersion"), "unknown apiVersion %q (want %s, or %s for OpenSLO documents)", fy.APIVersion, NativeVersion, openSLOVersion)
	}
	if fy.Service == "" {
		v.errorf(v.line(), "service is required (it becomes the sloth_service label)")
	} else if !sloName.MatchString(fy.Service) {
		v.errorf(v.line("service"), "service %q: want lower-case letters, digits and dashes (it is part of sloth_id and of rule group names)", fy.Service)
	}
	if len(fy.SLOs) == 0 {
		v.errorf(v.line("slos"), "no slos")
	}
	seen := map[string]int{}
	for i := range fy.SLOs {
		s := v.nativeSLO(fy.Service, &fy.SLOs[i], []any{"slos", i})
		if prev, ok := seen[s.Name]; ok && s.Name != "" {
			v.errorf(s.Line, "slo %q is defined twice (first at line %d)", s.Name, prev)
		}
		seen[s.Name] = s.Line
		f.SLOs = append(f.SLOs, s)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// nativeSLO converts and validates one SLO of the native format.
func (v *validator) nativeSLO(service string, y *sloYAML, at []any) SLO {
	s := SLO{Service: service, Name: y.Name, Description: y.Description, Labels: y.Labels, Line: v.line(at...)}
	path := func(p ...any) []any { return append(append([]any{}, at...), p...) }
	v.name(s.Name, path("name"))
	v.labels(y.Labels, path("labels"), "labels")
	if y.Objective == nil {
		v.errorf(s.Line, "slo %q: objective is required (the fraction of good events, e.g. 0.99)", s.Name)
	} else {
		s.Objective = v.objective(s.Name, y.Objective.r, path("objective"))
	}
	if y.Period == nil {
		v.errorf(s.Line, "slo %q: period is required (e.g. 30d, 28d, 7d, 1d)", s.Name)
	} else {
		s.Period = y.Period.d
		if s.Period < baseWindow {
			v.errorf(v.line(path("period")...), "slo %q: period %s is shorter than %s, the shortest SLI window", s.Name, FormatDuration(s.Period), FormatDuration(baseWindow))
		}
	}
	if y.SLI == nil {
		v.errorf(s.Line, "slo %q: sli is required (latency, goodMinutes or ratio)", s.Name)
	} else {
		s.SLI = v.sli(s.Name, y.SLI, path("sli"))
	}
	s.Alerting = v.alerting(&s, y.Alerting, path("alerting"))
	return s
}

// yaml.v3 reports unknown keys as "line 3: field foo not found in type
// slo.sliYAML"; users know keys, not Go types.
var (
	unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)
	lineMessage  = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
)

// yamlError turns a yaml.v3 error into one Error per problem, with lines.
func yamlError(name string, err error) error {
	var msgs []string
	if te, ok := errors.AsType[*yaml.TypeError](err); ok {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var errs []error
	for _, m := range msgs {
		if sm := unknownField.FindStringSubmatch(m); sm != nil {
			line, _ := strconv.Atoi(sm[1])
			msg := fmt.Sprintf("unknown key %q", sm[2])
			if strings.HasSuffix(sm[3], ".sliYAML") || strings.HasSuffix(sm[3], ".openSLOSLISpec") {
				msg = fmt.Sprintf("unknown indicator %q (want %s)", sm[2], indicatorKinds(sm[3]))
			}
			errs = append(errs, &Error{File: name, Line: line, Msg: msg})
			continue
		}
		if sm := lineMessage.FindStringSubmatch(m); sm != nil {
			line, _ := strconv.Atoi(sm[1])
			errs = append(errs, &Error{File: name, Line: line, Msg: sm[2]})
			continue
		}
		errs = append(errs, &Error{File: name, Msg: strings.TrimPrefix(m, "yaml: ")})
	}
	return errors.Join(errs...)
}

func indicatorKinds(goType string) string {
	if strings.HasSuffix(goType, ".openSLOSLISpec") {
		return "ratioMetric or thresholdMetric"
	}
	return "latency, goodMinutes or ratio"
}

// lookup follows path (mapping keys and sequence indices) from a document
// or node; nil when a step is missing.
func lookup(n *yaml.Node, path ...any) *yaml.Node {
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, p := range path {
		if n == nil {
			return nil
		}
		switch p := p.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return nil
			}
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					next = n.Content[i+1]
					break
				}
			}
			n = next
		case int:
			if n.Kind != yaml.SequenceNode || p >= len(n.Content) {
				return nil
			}
			n = n.Content[p]
		}
	}
	return n
}

// lineOf is the line of the deepest node of path that exists.
func lineOf(doc *yaml.Node, path ...any) int {
	for i := len(path); i >= 0; i-- {
		if n := lookup(doc, path[:i]...); n != nil {
			return n.Line
		}
	}
	return 0
}
