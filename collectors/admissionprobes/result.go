package admissionprobes

import (
	"context"
	"errors"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Results, the `result` label.
const (
	Allowed = "allowed"
	Denied  = "denied"
	Timeout = "timeout"
	Error   = "error"
)

// Results lists every result, created at zero for each probe.
var Results = []string{Allowed, Denied, Timeout, Error}

// Reasons, the `reason` label of the errors counter: why a probe got no
// answer from admission (a timeout or an error result).
const (
	ReasonWebhookTimeout     = "webhook_timeout"     // a webhook's deadline under failurePolicy Fail
	ReasonWebhookUnreachable = "webhook_unreachable" // any other failed webhook call under Fail: refused, TLS, no endpoints
	ReasonTimeout            = "timeout"             // the probe's own deadline, or a 504
	ReasonForbidden          = "forbidden"           // RBAC: the exporter may not write the probed resource
	ReasonNotFound           = "not_found"           // 404: the resource is not served, the object (UPDATE, DELETE) is gone
	ReasonConflict           = "conflict"            // 409: the UPDATE's object changed, or CREATE's exists
	ReasonInvalid            = "invalid"             // 400 or 422 not from a policy: the probe object is invalid
	ReasonServerError        = "server_error"        // another 5xx: the API server itself
	ReasonTransport          = "transport"           // no answer at all: connection, TLS, decoding
)

// Reasons lists every reason, created at zero for each probe.
var Reasons = []string{ReasonWebhookTimeout, ReasonWebhookUnreachable, ReasonTimeout, ReasonForbidden, ReasonNotFound,
	ReasonConflict, ReasonInvalid, ReasonServerError, ReasonTransport}

// Outcome turns a dry-run request's outcome into a result and, for a
// Timeout or an Error, the reason it got no answer from admission ("" for
// Allowed and Denied). The API server's messages (k8s.io/apiserver
// pkg/admission/plugin/webhook/errors and validating/dispatcher.go, seen on
// v1.37):
//   - a webhook denial: `admission webhook "NAME" denied the request: …`
//     (403 unless the webhook sets a code);
//   - a webhook that timed out under failurePolicy Fail: 500 `Internal error
//     occurred: failed calling webhook "NAME": failed to call webhook: Post
//     "…?timeout=1s": context deadline exceeded`; any other failed call
//     (refused, TLS, no endpoints) is unreachable;
//   - a built-in admission plugin's refusal: 403 Forbidden (ResourceQuota,
//     NamespaceLifecycle, PodSecurity); RBAC's 403 says `User "…" cannot
//     create resource …` and is an error, not a denial;
//   - a ValidatingAdmissionPolicy: 422 `ValidatingAdmissionPolicy '…' with
//     binding '…' denied request`.
//
// The probe's own deadline and a 504 are timeouts too.
func Outcome(err error) (result, reason string) {
	if err == nil {
		return Allowed, ""
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Timeout, ReasonTimeout
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		// The probe's clients set no http.Client Timeout (the deadline is
		// the context's, above): anything else unstructured is an error.
		return Error, ReasonTransport
	}
	s := status.Status()
	msg := s.Message
	switch {
	case strings.Contains(msg, "admission webhook \"") && strings.Contains(msg, "denied the request"):
		return Denied, ""
	case strings.Contains(msg, "ValidatingAdmissionPolicy") && strings.Contains(msg, "denied request"):
		return Denied, ""
	case s.Code == http.StatusGatewayTimeout:
		return Timeout, ReasonTimeout
	case strings.Contains(msg, "failed calling webhook"):
		if strings.Contains(msg, "deadline exceeded") || strings.Contains(msg, "Timeout exceeded") {
			if s.Code == http.StatusInternalServerError {
				return Timeout, ReasonWebhookTimeout
			}
			return Error, ReasonWebhookTimeout
		}
		return Error, ReasonWebhookUnreachable
	case s.Code == http.StatusForbidden && (!strings.Contains(msg, " cannot ") || !strings.Contains(msg, "resource \"")):
		return Denied, ""
	case s.Code == http.StatusForbidden:
		return Error, ReasonForbidden
	case s.Code == http.StatusNotFound:
		return Error, ReasonNotFound
	case s.Code == http.StatusConflict:
		return Error, ReasonConflict
	case s.Code == http.StatusBadRequest || s.Code == http.StatusUnprocessableEntity:
		return Error, ReasonInvalid
	case s.Code >= 500:
		return Error, ReasonServerError
	}
	return Error, ReasonTransport
}

func admissionOp(op string) admissionv1.OperationType { return admissionv1.OperationType(op) }
