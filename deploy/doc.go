// Package deploy holds no Go code: it is the directory of the Kubernetes
// manifests (the kustomize base, components and overlays, and the Helm
// chart). Its tests render all of them with the pinned kubectl and Helm of
// tools/build.sh and check what a cluster and prometheus-operator would
// make of the result: a server-side dry run against the sandbox's API
// server, and strict decoding of the custom resources into
// prometheus-operator's own Go types.
package deploy
