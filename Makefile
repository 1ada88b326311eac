# The two commands a newcomer runs: `make demo` and `make test`.
# Everything else they need is built from pinned Go modules into .bin/.

GO        ?= go
BIN       := $(CURDIR)/.bin
BINARY    := $(BIN)/kube-convergence-exporter
PKG       := github.com/kube-convergence/kube-convergence-exporter
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X github.com/prometheus/common/version.Version=$(VERSION) \
             -X github.com/prometheus/common/version.Revision=$(REVISION) \
             -X github.com/prometheus/common/version.Branch=$(BRANCH) \
             -X github.com/prometheus/common/version.BuildUser=$(USER) \
             -X github.com/prometheus/common/version.BuildDate=$(shell date -u +%Y%m%d-%H:%M:%S)
GOLANGCI_LINT_VERSION := v2.15.0

# End-to-end packages start a real control plane (deploy: an API server for
# the manifests' server-side dry run) each: run them one at a time (2 cores;
# several sandboxes at once starve each other and flake).
E2E_PKGS  := ./internal/sandbox/... ./deploy/... ./e2e/...
UNIT_PKGS  = $(shell $(GO) list ./... | grep -v -e '/e2e' -e '/internal/sandbox' -e '/deploy$$')

export KCE_BIN_DIR := $(BIN)

.PHONY: all build test test-unit test-e2e bench bench-smoke fuzz rules-test rules-mutation soak scale cardinality demo generate lint tools chromium release clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) ./cmd/kube-convergence-exporter

## tools: build the pinned real components (etcd, kube-apiserver, controller-manager,
## scheduler, kubectl, kwok, prometheus, promtool, alertmanager, helm,
## kustomize-controller and the Flux CRDs) into .bin/.
tools:
	@tools/build.sh

# chromium first, so that a machine without it stops before the builds;
# lint before the unit tests: collectors/layering_test.go runs the
# golangci-lint that lint installs.
test: chromium tools build
	$(GO) vet ./...
	$(MAKE) lint
	$(MAKE) test-unit bench-smoke test-e2e

# Unit packages run with the race detector: handlers of different informers,
# Tick and Collect share each collector's state. internal/release shares
# nothing between goroutines of its own, and under -race the gzip and
# SHA-256 of its image's 59 MB binary layer take 3 to 5 times as long
# (its test: 10 s without, 27-50 s with on 2 busy cores): it runs without.
RACE_FREE_PKGS := $(PKG)/internal/release
test-unit:
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 15m $(filter-out $(RACE_FREE_PKGS),$(UNIT_PKGS))
	$(GO) test -count=1 -timeout 5m $(RACE_FREE_PKGS)

## bench: every benchmark of the unit packages, 6 runs each, into
## bench.txt in benchstat's format (docs/performance.md; about 11 minutes
## on 2 busy cores). Compare two runs with benchstat old.txt bench.txt.
bench:
	@# Not a pipe into tee: sh has no pipefail, a failing benchmark must fail make.
	$(GO) test -count=6 -run '^$$' -bench . -benchmem -timeout 60m $(UNIT_PKGS) > bench.txt; status=$$?; cat bench.txt; exit $$status

# bench-smoke: each benchmark once, so that none rots (make test). The
# e2e, sandbox and deploy packages have no benchmark and would each start
# a control plane for nothing.
bench-smoke:
	$(GO) test -count=1 -run '^$$' -bench . -benchtime=1x $(UNIT_PKGS)

test-e2e: chromium
	$(GO) test -count=1 -p 1 -timeout 30m $(E2E_PKGS)

## chromium: Debian's chromium for the browser tests (e2e/browser_test.go
## fails without it). Installed with apt-get when missing and this user may
## (root, apt-get present); otherwise make stops with the command to run.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if ! command -v apt-get >/dev/null 2>&1; then \
	    echo "make: the browser tests need Chromium as chromium on the PATH, and this system has no apt-get: install it with the system's package manager (Debian: apt-get install -y chromium)" >&2; exit 1; \
	  elif [ "$$(id -u)" != 0 ]; then \
	    echo "make: the browser tests need Debian's chromium, which is missing; run: sudo apt-get update && sudo apt-get install -y chromium" >&2; exit 1; \
	  fi; \
	  echo "make: installing Debian's chromium for the browser tests (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	}

# Every fuzz target as package:Func (fuzz_test.go in internal/gen checks that
# it names each func Fuzz* of the module, and only those).
FUZZ_TARGETS := \
	internal/config:FuzzParse \
	slo:FuzzParse \
	slo:FuzzParseOpenSLO \
	slo:FuzzDuration \
	internal/informers:FuzzCompactEvent \
	internal/informers:FuzzCompactPod \
	internal/informers:FuzzCompactWorkload \
	internal/informers:FuzzCompactNode \
	internal/informers:FuzzCompactNamespace \
	internal/informers:FuzzCompactService \
	internal/informers:FuzzCompactEndpointSlice \
	internal/informers:FuzzCustomTransform \
	internal/informers:FuzzCompactDecoded \
	internal/records:FuzzConventionTransform \
	internal/records:FuzzJSONPathOverride \
	collectors/retries:FuzzWarningCounting \
	slo/report:FuzzBuildFromAnswers \
	internal/timeline/web:FuzzTimelineRequest \
	cmd/kube-convergence-exporter:FuzzExplainAnswer \
	internal/admission:FuzzWebhookConfiguration \
	internal/admission:FuzzMatchConditions
FUZZTIME ?= 30s

## fuzz: every fuzz target of docs/fuzzing.md for 30 s, one after another,
## one worker each (-parallel=1: the 2 cores are shared); not part of make
## test, whose plain go test runs every target's seeds. About 14 minutes
## with the builds. Minimizing a new input may take 2 s, not Go's 60 s,
## which spent most targets' 30 s on their first new input (docs/fuzzing.md).
## A failing input is written to the package's testdata/fuzz/<FuzzName>/:
## fix the code and commit the input as a seed.
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; fn=$${t#*:}; echo "fuzz $$fn ./$$pkg"; \
	  $(GO) test -run=XXX -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=2s -parallel=1 ./$$pkg; \
	done

## rules-test: promtool check rules and promtool test rules on the bundled
## rules (part of test-unit too; needs the promtool of make tools).
rules-test:
	$(GO) test -count=1 ./rules/

## rules-mutation: perturb every burn-rate factor, window and `for` of the
## generated SLO rules, require a promtool test to fail on each, and record
## which one in rules/testdata/mutants.tsv (45 minutes on 2 busy cores from an
## empty table, much less with it; rules/mutation_test.go, docs/slo.md).
rules-mutation:
	KCE_MUTATION=1 $(GO) test -count=1 -timeout 90m -run TestEveryMutantOfTheSLORulesFailsATest ./rules/

## soak: the calibration suite (e2e/calibration) with a 10-minute healthy
## run instead of make test's 3 minutes, and the outages' alerts that need
## ten minutes without progress (KubeConvergenceRolloutStuck) or 15 minutes
## of failing (KubeConvergenceControllerRetrying); then the dedicated
## controller and churn alert runs of e2e/: about 50 minutes on 2 cores.
soak: tools build
	KCE_SOAK=1 KCE_CALIBRATION_DURATION=10m $(GO) test -count=1 -p 1 -timeout 60m -v ./e2e/calibration/
	KCE_SOAK=1 $(GO) test -count=1 -p 1 -timeout 30m -v -run 'TestControllerAlertsOnTheSandbox|TestChurnProgressIsNoHotLoop' ./e2e/

## scale: the scale run (docs/scale.md), not part of make test: SCALE_PODS
## pods (default 20000) in SCALE_PODS/10 Deployments, converged, then a
## template change of every Deployment; the exporter, and kube-state-metrics
## beside it when KSM_BIN names a binary you built from its source (the
## project never builds it). Prints a markdown table and writes it to
## SCALE_OUT (default scale-result.md). 2,000 pods: about 10 minutes here.
scale: tools build
	$(GO) build -o $(BIN)/kce-scale ./cmd/kce-scale
	$(BIN)/kce-scale

## cardinality: the series budget of docs/cardinality.md, not part of make
## test: exporters with each label policy (CARD_VARIANTS, default keep,
## drop, allowlist, thresholds) on one kwok cluster of CARD_NAMESPACES busy
## namespaces (default 10,100,1000); with CARD_PROMETHEUS=1 a Prometheus
## scrapes them and the series it stores are counted. Writes CARD_OUT
## (default cardinality-result.md). About 25 minutes here.
cardinality: tools build
	$(GO) build -o $(BIN)/kce-scale ./cmd/kce-scale
	$(BIN)/kce-scale cardinality

demo: tools build
	$(GO) build -o $(BIN)/kce-demo ./cmd/kce-demo
	$(BIN)/kce-demo

generate:
	$(GO) run ./internal/gen

## release: the artefacts of release VERSION (semver without a leading v:
## make release VERSION=0.1.0) into dist/, from a clean tree: static
## binaries for linux/amd64, linux/arm64 and darwin/arm64, their SBOMs,
## SHA256SUMS, the multi-arch OCI image layout (dist/oci) and the packaged
## chart (cmd/kce-release, docs/releasing.md). Not part of make test; its
## image and chart are tested in internal/release. The VERSION above (git
## describe) is the default of make build only: a release takes the one
## given on the command line or in the environment.
RELEASE_VERSION = $(if $(filter command line environment environment override override,$(origin VERSION)),$(VERSION))
release:
	@if [ -z '$(RELEASE_VERSION)' ]; then echo "make release: VERSION is required: make release VERSION=x.y.z (semver without a leading v; docs/releasing.md)" >&2; exit 2; fi
	$(GO) run ./cmd/kce-release -version '$(RELEASE_VERSION)' -out dist

## lint: golangci-lint (the pinned version, installed into .bin/ when absent
## or another version) with .golangci.yml, whose depguard rules hold the
## layering of ARCHITECTURE.md.
lint:
	@$(BIN)/golangci-lint version --short 2>/dev/null | grep -qx '$(GOLANGCI_LINT_VERSION:v%=%)' || \
		GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	$(BIN)/golangci-lint run ./...

clean:
	rm -rf $(BINARY) .cache/ dist/
