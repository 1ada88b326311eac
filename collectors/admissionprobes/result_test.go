package admissionprobes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func status(code int32, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}

func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		name         string
		err          error
		want, reason string
	}{
		{"allowed", nil, Allowed, ""},
		{"webhook denial", status(403, metav1.StatusReasonForbidden, `admission webhook "deny.example.com" denied the request: no`), Denied, ""},
		{"webhook denial with own code", status(400, metav1.StatusReasonBadRequest, `admission webhook "deny.example.com" denied the request without explanation`), Denied, ""},
		{"quota", status(403, metav1.StatusReasonForbidden, `configmaps "p" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1`), Denied, ""},
		{"policy", status(422, metav1.StatusReasonInvalid, `configmaps "p" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed expression: x`), Denied, ""},
		{"webhook timeout", status(500, metav1.StatusReasonInternalError, `Internal error occurred: failed calling webhook "slow.example.com": failed to call webhook: Post "https://127.0.0.1:4000/sleep/2s?timeout=1s": context deadline exceeded`), Timeout, ReasonWebhookTimeout},
		{"gateway timeout", status(504, metav1.StatusReasonTimeout, `Timeout: request did not complete within requested timeout`), Timeout, ReasonTimeout},
		{"probe deadline", fmt.Errorf("create: %w", context.DeadlineExceeded), Timeout, ReasonTimeout},
		{"rbac", status(403, metav1.StatusReasonForbidden, `configmaps is forbidden: User "viewer" cannot create resource "configmaps" in API group "" in the namespace "p"`), Error, ReasonForbidden},
		{"webhook unreachable", status(500, metav1.StatusReasonInternalError, `Internal error occurred: failed calling webhook "x": failed to call webhook: Post "https://127.0.0.1:1/?timeout=10s": dial tcp 127.0.0.1:1: connect: connection refused`), Error, ReasonWebhookUnreachable},
		{"not found", status(http.StatusNotFound, metav1.StatusReasonNotFound, `configmaps "p" not found`), Error, ReasonNotFound},
		{"transport", errors.New("dial tcp: connection refused"), Error, ReasonTransport},
		{"conflict", status(http.StatusConflict, metav1.StatusReasonConflict, `configmaps "p" already exists`), Error, ReasonConflict},
		{"invalid", status(422, metav1.StatusReasonInvalid, `ConfigMap "P" is invalid: metadata.name: Invalid value`), Error, ReasonInvalid},
		{"server error", status(500, metav1.StatusReasonInternalError, `Internal error occurred: etcdserver: request timed out`), Error, ReasonServerError},
		{"unavailable", status(503, metav1.StatusReasonServiceUnavailable, `the server is currently unable to handle the request`), Error, ReasonServerError},
	} {
		if res, reason := Outcome(tc.err); res != tc.want || reason != tc.reason {
			t.Errorf("%s: Outcome = %q, %q, want %q, %q", tc.name, res, reason, tc.want, tc.reason)
		}
	}
}
