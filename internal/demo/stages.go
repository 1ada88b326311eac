package demo

// StageRunningNotReady is a kwok Stage of the project: pods annotated
// kce.test/never-ready=true (and pod-ready.stage.kwok.x-k8s.io/weight=0, so
// the stock pod-ready stage is never chosen for them) start their
// containers but never pass readiness: the `readiness_failing` shape.
const StageRunningNotReady = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: kce-pod-running-not-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.metadata.annotations["kce.test/never-ready"]'
      operator: 'In'
      values: ['true']
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
    - key: '.status.conditions.[] | select( .type == "Initialized" ) | .status'
      operator: 'In'
      values: ['True']
    - key: '.status.containerStatuses.[].state.running.startedAt'
      operator: 'DoesNotExist'
  weight: 1
  delay:
    durationMilliseconds: 500
    jitterDurationMilliseconds: 500
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        reason: ContainersNotReady
        status: "False"
        type: ContainersReady
      - lastTransitionTime: {{ $now | Quote }}
        reason: ContainersNotReady
        status: "False"
        type: Ready
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
`

// NeverReady are the pod annotations that select stageRunningNotReady.
var NeverReady = map[string]string{
	"kce.test/never-ready":                        "true",
	"pod-ready.stage.kwok.x-k8s.io/weight":        "0",
	"pod-create.stage.kwok.x-k8s.io/delay":        "200ms",
	"pod-create.stage.kwok.x-k8s.io/jitter-delay": "200ms",
}
