package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// answers is a query API that answers every instant query with instant,
// every range query with rng and the targets API with targets, all with
// the HTTP status code; in process, with no server (a fuzz input per
// answer, thousands of reports a second).
type answers struct {
	code                  int
	instant, rng, targets []byte
}

func (a *answers) URL(ep string, args map[string]string) *url.URL {
	p := ep
	for k, v := range args {
		p = strings.ReplaceAll(p, ":"+k, v)
	}
	return &url.URL{Scheme: "http", Host: "prometheus:9090", Path: p}
}

func (a *answers) Do(_ context.Context, req *http.Request) (*http.Response, []byte, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	body := a.instant
	switch {
	case strings.HasSuffix(req.URL.Path, "/api/v1/query_range"):
		body = a.rng
	case strings.HasSuffix(req.URL.Path, "/api/v1/targets"):
		body = a.targets
	}
	return &http.Response{StatusCode: a.code, Status: http.StatusText(a.code), Header: http.Header{"Content-Type": {"application/json"}}, Request: req}, body, nil
}

// fuzzSLOs are the SLOs the report is built for: one of each indicator
// kind (the seeds' three-indicator-kinds file of slo's FuzzParse).
const fuzzSLOs = `service: shop
slos:
  - name: latency
    objective: 0.995
    period: 28d
    sli:
      latency:
        metric: kube_convergence_endpoint_propagation_seconds
        threshold: 1
  - name: minutes
    objective: 0.999
    period: 7d
    sli:
      goodMinutes:
        badWhen: sum(rate(http_requests_total{code=~"5.."}[1m])) > 1
        countWhen: sum(rate(http_requests_total[1m]))
  - name: ratio
    objective: 0.95
    period: 30d
    sli:
      ratio:
        errorQuery: sum(rate(http_requests_total{code=~"5.."}[{{.window}}]))
        totalQuery: sum(rate(http_requests_total[{{.window}}]))
`

// fuzzAt is the end of the fuzzed reports' windows (1794312000).
var fuzzAt = time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)

// FuzzBuildFromAnswers builds the report of fuzzSLOs over 6 hours from
// any answers of the query API (answers: one body for the instant
// queries, one for the range queries, one for /api/v1/targets, an HTTP
// status), through the report's client (NewClient) and client_golang's
// decoding, as `slo report` does. Seeds (testdata/fuzz/FuzzBuildFromAnswers):
// Prometheus' answers in its documented format (a sample, a scalar, a
// matrix with gaps, labelled vectors for the worst contributors, the
// targets with their scrape interval, warnings, an error envelope, "too
// many samples", NaN, a 503). It checks:
//
//   - a failure is a *QueryError naming one of the SLOs and its query,
//     with the report of the warnings gathered until then;
//   - a report has one SLO per SLO of the file, and renders in every
//     format; its JSON is valid JSON (encoding/json refuses NaN and
//     ±Inf: no non-finite number gets through), gap rows are at most
//     MaxGapRows, the scrape interval is a positive duration, every
//     warning names its SLO.
func FuzzBuildFromAnswers(f *testing.F) {
	file, err := slo.Parse("fuzz.yaml", []byte(fuzzSLOs))
	if err != nil {
		f.Fatal(err)
	}
	var ids []string
	for i := range file.SLOs {
		ids = append(ids, file.SLOs[i].ID())
	}
	f.Fuzz(func(t *testing.T, code uint16, instant, rng, targets []byte) {
		if len(instant)+len(rng)+len(targets) > 64<<10 {
			return
		}
		a := &answers{code: int(code%600) + 100, instant: instant, rng: rng, targets: targets}
		c := NewClient(a, func(string, ...any) {})
		r, err := Build(context.Background(), v1.NewAPI(c), file, Options{
			At: fuzzAt, Window: 6 * time.Hour, Source: "http://user:secret@prometheus:9090", Targets: TargetsFrom(c),
		})
		if err != nil {
			var qe *QueryError
			switch {
			case !errors.As(err, &qe):
				t.Fatalf("an error that is not a *QueryError: %T %v", err, err)
			case !slices.Contains(ids, qe.SLO) || qe.Query == "":
				t.Errorf("error names SLO %q, query %q", qe.SLO, qe.Query)
			case r == nil:
				t.Errorf("no report (of the warnings) with the error")
			case strings.Contains(err.Error(), "secret"):
				t.Errorf("the error shows the password: %v", err)
			}
			return
		}
		checkReport(t, r, ids)
	})
}

func checkReport(t *testing.T, r *Report, ids []string) {
	t.Helper()
	if len(r.SLOs) != len(ids) {
		t.Fatalf("%d SLOs reported, want %d", len(r.SLOs), len(ids))
	}
	for i := range r.SLOs {
		s := &r.SLOs[i]
		if len(s.Gaps) > MaxGapRows {
			t.Errorf("%s: %d gap rows, over %d", s.ID, len(s.Gaps), MaxGapRows)
		}
		if d, err := slo.ParseDuration(s.ScrapeInterval.Interval); err != nil || d <= 0 {
			t.Errorf("%s: scrape interval %q: %v", s.ID, s.ScrapeInterval.Interval, err)
		}
	}
	for _, w := range r.Warnings {
		if !slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(w, id+": ") }) {
			t.Errorf("warning %q names no SLO", w)
		}
	}
	for _, format := range Formats() {
		var b bytes.Buffer
		if err := Render(&b, r, format); err != nil {
			t.Fatalf("render %s: %v", format, err)
		}
		if format == FormatJSON && !json.Valid(b.Bytes()) {
			t.Errorf("the JSON report is not JSON:\n%s", b.String())
		}
		if strings.Contains(b.String(), "secret") {
			t.Errorf("the %s report shows the source's password", format)
		}
	}
}

var _ api.Client = (*answers)(nil)
