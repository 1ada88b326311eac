package demo

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/slowwebhook"
)

// The demo's admission webhook: a real HTTPS always-allow server, called
// by the API server for ConfigMaps labelled kce-demo/probe in the demo
// namespace, that answers fast for SlowWebhookPeriod, then slowly (6 s
// against a 10 s timeout: KubeConvergenceWebhookNearTimeout) for as long,
// and so on. The exporter's admission probe goes through it.
const (
	SlowWebhookConfiguration = "kce-demo-slow"
	SlowWebhookName          = "slow.demo.kce.io"
	SlowWebhookPeriod        = 3 * time.Minute
	SlowWebhookFast          = 100 * time.Millisecond
	SlowWebhookSlow          = 6 * time.Second
	slowWebhookLabel         = "kce-demo/probe"
)

// WebhookConfig is the exporter configuration of the demo's webhook part:
// a probe through the slow webhook, and the API server's own webhook
// latency read by the exporter.
const WebhookConfig = `webhooks:
  apiServerMetrics: {enabled: true, interval: 30s}
admissionProbes:
  - name: demo-configmap
    resource: configmaps
    namespace: ` + Namespace + `
    operation: CREATE
    interval: 10s
    object:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: kce-admission-probe
        labels: {` + slowWebhookLabel + `: "true"}
`

// InstallSlowWebhook starts the webhook server and registers it. The
// caller closes the server after deleting the configuration (or with the
// sandbox).
func InstallSlowWebhook(ctx context.Context, c kubernetes.Interface) (*slowwebhook.Server, error) {
	srv, err := slowwebhook.Start()
	if err != nil {
		return nil, err
	}
	srv.SetDelay(SlowWebhookFast)
	cfg := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: SlowWebhookConfiguration},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:         SlowWebhookName,
			ClientConfig: admissionv1.WebhookClientConfig{URL: ptr.To(srv.URL() + "/"), CABundle: srv.CA.PEM},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": Namespace}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{slowWebhookLabel: "true"}},
			FailurePolicy:           ptr.To(admissionv1.Ignore),
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](10),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("demo webhook: %w", err)
	}
	return srv, nil
}

// RunSlowWebhookTimer turns the webhook slow and fast again every
// SlowWebhookPeriod until ctx is done.
func RunSlowWebhookTimer(ctx context.Context, srv *slowwebhook.Server, logger *slog.Logger) {
	t := time.NewTicker(SlowWebhookPeriod)
	defer t.Stop()
	slow := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		slow = !slow
		d := SlowWebhookFast
		if slow {
			d = SlowWebhookSlow
		}
		srv.SetDelay(d)
		logger.Info("demo webhook delay changed", "webhook", SlowWebhookName, "delay", d)
	}
}
