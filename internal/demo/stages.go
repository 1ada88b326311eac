package demo

import "time"

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

// StageReadyToStartContainers is a pair of kwok Stages of the project that
// play the kubelet's PodReadyToStartContainers condition, which kwok's stock
// stages never set. Pods annotated kce.test/ready-to-start-containers=true
// (and pod-create.stage.kwok.x-k8s.io/weight=0, so the stock pod-create
// stage is never chosen for them; other pods are not affected) go through:
//
//  1. kce-pod-sandbox-ready, after kce.test/ready-to-start-containers-delay:
//     PodReadyToStartContainers=True, pod IP assigned (sandbox and network);
//  2. kce-pod-initialize, after the pod-create delay annotations:
//     Initialized=True, containers created but not started;
//
// then the stock pod-ready stage (ContainersReady and Ready, after the
// pod-ready delay annotations). That is the kubelet's order for a pod with
// init containers: sandbox, init containers, containers. Use
// ReadyToStartContainers for the annotations.
const StageReadyToStartContainers = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: kce-pod-sandbox-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.metadata.annotations["kce.test/ready-to-start-containers"]'
      operator: 'In'
      values: ['true']
    - key: '.status.podIP'
      operator: 'DoesNotExist'
  weight: 1
  delay:
    durationMilliseconds: 1000
    durationFrom:
      expressionFrom: '.metadata.annotations["kce.test/ready-to-start-containers-delay"]'
    jitterDurationMilliseconds: 1000
    jitterDurationFrom:
      expressionFrom: '.metadata.annotations["kce.test/ready-to-start-containers-delay"]'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastProbeTime: null
        lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: PodReadyToStartContainers
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Pending
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: kce-pod-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.metadata.annotations["kce.test/ready-to-start-containers"]'
      operator: 'In'
      values: ['true']
    - key: '.status.conditions.[] | select( .type == "PodReadyToStartContainers" ) | .status'
      operator: 'In'
      values: ['True']
    - key: '.status.conditions.[] | select( .type == "Initialized" ) | .status'
      operator: 'DoesNotExist'
  weight: 1
  delay:
    durationMilliseconds: 1000
    durationFrom:
      expressionFrom: '.metadata.annotations["pod-create.stage.kwok.x-k8s.io/delay"]'
    jitterDurationMilliseconds: 1000
    jitterDurationFrom:
      expressionFrom: '.metadata.annotations["pod-create.stage.kwok.x-k8s.io/jitter-delay"]'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastProbeTime: null
        lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastProbeTime: null
        lastTransitionTime: {{ $now | Quote }}
        reason: ContainersNotReady
        status: "False"
        type: ContainersReady
      - lastProbeTime: null
        lastTransitionTime: {{ $now | Quote }}
        reason: ContainersNotReady
        status: "False"
        type: Ready
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          waiting:
            reason: ContainerCreating
      {{ end }}
      phase: Pending
`

// ReadyToStartContainers returns the pod annotations that select
// StageReadyToStartContainers with exact delays: the sandbox after sandbox,
// Initialized create later, Ready ready after that.
func ReadyToStartContainers(sandbox, create, ready time.Duration) map[string]string {
	a := Delays(create, ready)
	a["kce.test/ready-to-start-containers"] = "true"
	a["kce.test/ready-to-start-containers-delay"] = sandbox.String()
	a["pod-create.stage.kwok.x-k8s.io/weight"] = "0"
	return a
}
