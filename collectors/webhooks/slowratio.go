package webhooks

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"

	"github.com/kube-convergence/kube-convergence-exporter/internal/admission"
)

// apiServerWebhookHistogram is the API server's webhook latency histogram
// (k8s.io/apiserver pkg/admission/metrics, STABLE), labels name, type
// (validating, admit), operation, rejected.
const apiServerWebhookHistogram = "apiserver_admission_webhook_admission_duration_seconds"

// hookKey is a webhook as the API server's metrics name it, with the
// exporter's type (admit is mutating).
type hookKey struct{ Webhook, Type string }

// histogram is one webhook's cumulative counts, summed over operation and
// rejected: count per upper bound, and the total.
type histogram struct {
	Buckets map[float64]float64
	Count   float64
}

// parseWebhookHistograms reads the API server's text exposition and
// returns the webhook latency histogram per webhook and type. It streams:
// only the lines of the webhook histogram are kept and parsed, not the API
// server's whole /metrics (tens of thousands of series, several MB on a
// large cluster), and a malformed line of another family does not matter.
func parseWebhookHistograms(r io.Reader) (map[hookKey]histogram, error) {
	var kept bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024) // a line of 1 MB at most
	for sc.Scan() {
		if line := sc.Bytes(); webhookHistogramLine(line) {
			kept.Write(line)
			kept.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read API server metrics: %w", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(&kept)
	if err != nil {
		return nil, fmt.Errorf("parse API server metrics: %w", err)
	}
	out := map[hookKey]histogram{}
	mf := mfs[apiServerWebhookHistogram]
	if mf == nil {
		return out, nil
	}
	for _, m := range mf.Metric {
		if m.Histogram == nil {
			continue
		}
		k := hookKey{Webhook: label(m, "name"), Type: label(m, "type")}
		if k.Type == "admit" {
			k.Type = admission.Mutating
		}
		h, ok := out[k]
		if !ok {
			h = histogram{Buckets: map[float64]float64{}}
		}
		for _, b := range m.Histogram.Bucket {
			h.Buckets[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
		h.Count += float64(m.Histogram.GetSampleCount())
		out[k] = h
	}
	return out, nil
}

// webhookHistogramLine: the line is the webhook histogram's HELP, TYPE or
// one of its _bucket, _sum or _count samples.
func webhookHistogramLine(line []byte) bool {
	for _, c := range []string{"# HELP ", "# TYPE "} {
		if rest, ok := bytes.CutPrefix(line, []byte(c+apiServerWebhookHistogram)); ok {
			return len(rest) == 0 || rest[0] == ' '
		}
	}
	rest, ok := bytes.CutPrefix(line, []byte(apiServerWebhookHistogram))
	if !ok {
		return false
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if r, ok := bytes.CutPrefix(rest, []byte(suffix)); ok && len(r) > 0 && (r[0] == '{' || r[0] == ' ') {
			return true
		}
	}
	return false
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// slowRatios returns, per webhook, the share of its calls between two
// reads of the API server's histogram that took longer than the largest
// bucket at or below half the webhook's timeout. A webhook without calls in
// between, without a timeout or without such a bucket has no ratio. A count
// that went down (the API server restarted) is read from zero.
func slowRatios(prev, cur map[hookKey]histogram, timeouts map[hookKey]time.Duration) map[hookKey]float64 {
	out := map[hookKey]float64{}
	for k, c := range cur {
		timeout, ok := timeouts[k]
		if !ok {
			continue
		}
		threshold := math.Inf(-1)
		for b := range c.Buckets {
			if b <= timeout.Seconds()/2 && b > threshold {
				threshold = b
			}
		}
		if math.IsInf(threshold, -1) {
			continue
		}
		p, ok := prev[k]
		if !ok || p.Count > c.Count {
			p = histogram{}
		}
		calls := c.Count - p.Count
		if calls <= 0 {
			continue
		}
		fast := c.Buckets[threshold] - p.Buckets[threshold]
		out[k] = (calls - fast) / calls
	}
	return out
}

// readAPIServerMetrics gets the API server's /metrics (needs get on the
// non-resource URL /metrics) through the exporter's client.
func readAPIServerMetrics(ctx context.Context, rc rest.Interface) (map[hookKey]histogram, error) {
	body, err := rc.Get().AbsPath("/metrics").SetHeader("Accept", "text/plain;version=0.0.4").Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("get /metrics: %w", err)
	}
	defer body.Close()
	return parseWebhookHistograms(body)
}
