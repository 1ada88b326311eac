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

// processStart is the API server's process_start_time_seconds: with the
// address read, it tells one API server replica from another behind the
// kubernetes Service (each read reaches one replica).
const processStart = "process_start_time_seconds"

// scrape is one read of an API server's /metrics: its instance (the
// process start time; 0 when absent) and its webhook histograms.
type scrape struct {
	Instance float64
	Hooks    map[hookKey]histogram
}

// parseWebhookHistograms reads the API server's text exposition and
// returns the webhook latency histogram per webhook and type. It streams:
// only the lines of the webhook histogram are kept and parsed, not the API
// server's whole /metrics (tens of thousands of series, several MB on a
// large cluster), and a malformed line of another family does not matter.
func parseWebhookHistograms(r io.Reader) (map[hookKey]histogram, error) {
	sc, err := parseScrape(r)
	return sc.Hooks, err
}

// parseScrape is parseWebhookHistograms with the instance.
func parseScrape(r io.Reader) (scrape, error) {
	var kept bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024) // a line of 1 MB at most
	for sc.Scan() {
		if line := sc.Bytes(); webhookHistogramLine(line) || familyLine(line, processStart) {
			kept.Write(line)
			kept.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return scrape{}, fmt.Errorf("read API server metrics: %w", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(&kept)
	if err != nil {
		return scrape{}, fmt.Errorf("parse API server metrics: %w", err)
	}
	out := map[hookKey]histogram{}
	var instance float64
	if mf := mfs[processStart]; mf != nil && len(mf.Metric) == 1 && mf.Metric[0].Gauge != nil {
		instance = mf.Metric[0].Gauge.GetValue()
	}
	mf := mfs[apiServerWebhookHistogram]
	if mf == nil {
		return scrape{Instance: instance, Hooks: out}, nil
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
	return scrape{Instance: instance, Hooks: out}, nil
}

// familyLine: the line is the HELP, TYPE or sample line of a gauge or
// counter family without labels.
func familyLine(line []byte, name string) bool {
	for _, c := range []string{"# HELP ", "# TYPE ", ""} {
		if rest, ok := bytes.CutPrefix(line, []byte(c+name)); ok {
			return len(rest) > 0 && rest[0] == ' '
		}
	}
	return false
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

// calls is a webhook's calls between two reads of one API server, and how
// many of them were slow.
type calls struct{ All, Slow float64 }

// slowCalls returns, per webhook, its calls between two reads of one API
// server's histogram and how many took longer than the largest bucket at
// or below half the webhook's timeout. A webhook without calls in between,
// without a timeout or without such a bucket is left out. A count or
// bucket that went down (the API server restarted, or the reads were of
// two replicas after all) is read from zero, so 0 <= Slow <= All always.
func slowCalls(prev, cur map[hookKey]histogram, timeouts map[hookKey]time.Duration) map[hookKey]calls {
	out := map[hookKey]calls{}
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
		if !ok || p.Count > c.Count || p.Buckets[threshold] > c.Buckets[threshold] {
			p = histogram{}
		}
		all := c.Count - p.Count
		fast := c.Buckets[threshold] - p.Buckets[threshold]
		if all <= 0 || fast > all {
			continue
		}
		out[k] = calls{All: all, Slow: all - fast}
	}
	return out
}

// slowRatios is the slow share of one API server's calls between two reads.
func slowRatios(prev, cur map[hookKey]histogram, timeouts map[hookKey]time.Duration) map[hookKey]float64 {
	out := map[hookKey]float64{}
	for k, c := range slowCalls(prev, cur, timeouts) {
		out[k] = c.Slow / c.All
	}
	return out
}

// maxInstances bounds the API server replicas remembered.
const maxInstances = 16

// instances keeps, per API server replica (its process start time), the
// last histograms read from it and the calls of its last interval. Each
// read of /metrics through the kubernetes Service reaches one replica:
// comparing two reads of different replicas gave ratios of 6 and -10.
// Here each replica is compared with itself only, and the ratio of a
// webhook is the sum of its slow calls over the sum of its calls, across
// the replicas read within the last three intervals: a ratio of counts,
// in [0, 1].
type instances struct {
	byStart map[float64]*instance
}

type instance struct {
	last  map[hookKey]histogram
	calls map[hookKey]calls
	at    time.Time
}

// add takes one read at now and returns the ratios across the replicas
// read since now-window.
func (in *instances) add(sc scrape, timeouts map[hookKey]time.Duration, now time.Time, window time.Duration) map[hookKey]float64 {
	if in.byStart == nil {
		in.byStart = map[float64]*instance{}
	}
	i, ok := in.byStart[sc.Instance]
	if !ok {
		if len(in.byStart) >= maxInstances {
			oldest := math.NaN()
			for k, v := range in.byStart {
				if math.IsNaN(oldest) || v.at.Before(in.byStart[oldest].at) {
					oldest = k
				}
			}
			delete(in.byStart, oldest)
		}
		i = &instance{}
		in.byStart[sc.Instance] = i
	} else {
		i.calls = slowCalls(i.last, sc.Hooks, timeouts)
	}
	i.last, i.at = sc.Hooks, now
	sum := map[hookKey]calls{}
	for k, v := range in.byStart {
		if now.Sub(v.at) > window {
			delete(in.byStart, k) // a replica gone (or restarted: a new start time)
			continue
		}
		for h, c := range v.calls {
			s := sum[h]
			s.All += c.All
			s.Slow += c.Slow
			sum[h] = s
		}
	}
	out := make(map[hookKey]float64, len(sum))
	for h, c := range sum {
		out[h] = c.Slow / c.All
	}
	return out
}

// readAPIServerMetrics gets the API server's /metrics (needs get on the
// non-resource URL /metrics) through the exporter's client.
func readAPIServerMetrics(ctx context.Context, rc rest.Interface) (scrape, error) {
	body, err := rc.Get().AbsPath("/metrics").SetHeader("Accept", "text/plain;version=0.0.4").Stream(ctx)
	if err != nil {
		return scrape{}, fmt.Errorf("get /metrics: %w", err)
	}
	defer body.Close()
	return parseScrape(body)
}
