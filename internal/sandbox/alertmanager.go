package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/common/model"
)

// AlertmanagerOptions configures StartAlertmanager.
type AlertmanagerOptions struct {
	// Dir holds config, state and log. Default: a fresh temp dir, removed by
	// Stop.
	Dir string
	// BinDir holds the alertmanager binary; default as Options.BinDir.
	BinDir string
	// WebhookURL receives every notification (one receiver, one route).
	WebhookURL string
	// GroupWait and GroupInterval default to 1 s, RepeatInterval to 1 m:
	// Alertmanager's own defaults (30 s, 5 m, 4 h) would hold a test's first
	// notification back for 30 s.
	GroupWait, GroupInterval, RepeatInterval time.Duration
}

// Alertmanager is a running, non-clustered Alertmanager on loopback.
type Alertmanager struct {
	url    string
	dir    string
	ownDir bool
	sp     *spawner
	proc   *process

	stopOnce sync.Once
	stopErr  error
}

// StartAlertmanager starts Alertmanager on a free loopback port with
// clustering off, routing everything to o.WebhookURL, and waits until
// /-/ready answers.
func StartAlertmanager(ctx context.Context, o AlertmanagerOptions) (_ *Alertmanager, err error) {
	if o.WebhookURL == "" {
		return nil, errors.New("alertmanager: WebhookURL is required")
	}
	bin, dir, ownDir, err := prepareService("alertmanager", o.BinDir, o.Dir, "kce-alertmanager-")
	if err != nil {
		return nil, err
	}
	a := &Alertmanager{dir: dir, ownDir: ownDir, sp: newSpawner()}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.Stop())
		}
	}()
	// JSON is valid YAML; it spares quoting the URL.
	cfg := map[string]any{
		"route": map[string]any{
			"receiver": "webhook",
			// "..." groups by all labels: one notification per alert, which
			// is what a test wants to assert on.
			"group_by":        []string{"..."},
			"group_wait":      model.Duration(cmp.Or(o.GroupWait, time.Second)).String(),
			"group_interval":  model.Duration(cmp.Or(o.GroupInterval, time.Second)).String(),
			"repeat_interval": model.Duration(cmp.Or(o.RepeatInterval, time.Minute)).String(),
		},
		"receivers": []map[string]any{{
			"name": "webhook",
			"webhook_configs": []map[string]any{{
				"url":           o.WebhookURL,
				"send_resolved": true,
			}},
		}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("alertmanager: rendering config: %w", err)
	}
	cfgPath := filepath.Join(dir, "alertmanager.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return nil, fmt.Errorf("alertmanager: writing config: %w", err)
	}
	a.proc, a.url, err = launchService(ctx, a.sp, "alertmanager", bin, filepath.Join(dir, "alertmanager.log"), func(addr string) []string {
		return []string{
			"--config.file=" + cfgPath,
			"--storage.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + addr,
			// An empty cluster address turns gossip off; otherwise it binds
			// 0.0.0.0:9094, which collides between sandboxes and leaves
			// loopback.
			"--cluster.listen-address=",
		}
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// URL is Alertmanager's base URL, http://127.0.0.1:PORT.
func (a *Alertmanager) URL() string { return a.url }

// Dir is the directory that holds config, state and log.
func (a *Alertmanager) Dir() string { return a.dir }

// Stop stops Alertmanager by its pid and removes Dir if StartAlertmanager
// created it. It is idempotent.
func (a *Alertmanager) Stop() error {
	a.stopOnce.Do(func() { a.stopErr = stopService("alertmanager", a.proc, a.sp, a.dir, a.ownDir) })
	return a.stopErr
}

// ReceivedAlert is one alert of a webhook notification.
type ReceivedAlert struct {
	Status      string // "firing" or "resolved"
	Labels      map[string]string
	Annotations map[string]string
	StartsAt    time.Time
	// ReceivedAt is when the receiver got the notification.
	ReceivedAt time.Time
}

// webhookPayload is the part of Alertmanager's webhook body (version "4")
// that tests need; github.com/prometheus/alertmanager is not a dependency of
// this module.
type webhookPayload struct {
	Version string `json:"version"`
	Status  string `json:"status"`
	Alerts  []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		StartsAt    time.Time         `json:"startsAt"`
	} `json:"alerts"`
}

// WebhookReceiver is an HTTP server on 127.0.0.1 that records the alerts of
// Alertmanager webhook notifications.
type WebhookReceiver struct {
	srv *http.Server
	ln  net.Listener
	url string

	mu      sync.Mutex
	alerts  []ReceivedAlert
	changed chan struct{} // closed and replaced whenever alerts grow
	errs    []error       // undecodable requests, reported by WaitFor
}

// NewWebhookReceiver starts a receiver on a free loopback port.
func NewWebhookReceiver() (*WebhookReceiver, error) {
	ln, err := listenLoopback()
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	w := &WebhookReceiver{ln: ln, url: "http://" + ln.Addr().String() + "/", changed: make(chan struct{})}
	w.srv = &http.Server{Handler: http.HandlerFunc(w.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = w.srv.Serve(ln) }()
	return w, nil
}

func (w *WebhookReceiver) serve(rw http.ResponseWriter, r *http.Request) {
	now := time.Now()
	b, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	var p webhookPayload
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs = append(w.errs, fmt.Errorf("decoding notification %.200q: %w", b, err))
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	for _, a := range p.Alerts {
		w.alerts = append(w.alerts, ReceivedAlert{
			Status: a.Status, Labels: a.Labels, Annotations: a.Annotations,
			StartsAt: a.StartsAt, ReceivedAt: now,
		})
	}
	close(w.changed)
	w.changed = make(chan struct{})
	rw.WriteHeader(http.StatusOK)
}

// URL is the address to give Alertmanager as its webhook.
func (w *WebhookReceiver) URL() string { return w.url }

// Close stops the server.
func (w *WebhookReceiver) Close() { _ = w.srv.Close() }

// Alerts returns a copy of every alert received so far, oldest first.
func (w *WebhookReceiver) Alerts() []ReceivedAlert {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ReceivedAlert(nil), w.alerts...)
}

// WaitFor returns the first received alert (already received or arriving
// later) that match accepts, or an error after timeout that lists what did
// arrive.
func (w *WebhookReceiver) WaitFor(ctx context.Context, match func(ReceivedAlert) bool, timeout time.Duration) (ReceivedAlert, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	seen := 0
	for {
		w.mu.Lock()
		alerts, changed, errs := w.alerts[seen:], w.changed, errors.Join(w.errs...)
		seen = len(w.alerts)
		w.mu.Unlock()
		for _, a := range alerts {
			if match(a) {
				return a, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			err := fmt.Errorf("webhook receiver: no matching alert within %s; received %v", timeout, w.Alerts())
			if errs != nil {
				err = fmt.Errorf("%w; undecodable notifications: %w", err, errs)
			}
			return ReceivedAlert{}, err
		}
	}
}
