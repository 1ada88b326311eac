# syntax=docker/dockerfile:1

# Build:
#   docker build \
#     --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg BRANCH=$(git rev-parse --abbrev-ref HEAD) \
#     --build-arg BUILD_USER=$(id -un)@$(hostname) \
#     --build-arg BUILD_DATE=$(date -u +%Y%m%d-%H:%M:%S) \
#     -t ghcr.io/kube-convergence/kube-convergence-exporter:dev .
# The values end up in kube_convergence_build_info and --version.

# The builder runs on the build host's platform and cross-compiles (no
# emulation): CGO is off, so the binary is static for any TARGETARCH.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
ARG BRANCH=unknown
ARG BUILD_USER=unknown
ARG BUILD_DATE=unknown
WORKDIR /src
# Dependencies first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w \
        -X github.com/prometheus/common/version.Version=${VERSION} \
        -X github.com/prometheus/common/version.Revision=${REVISION} \
        -X github.com/prometheus/common/version.Branch=${BRANCH} \
        -X github.com/prometheus/common/version.BuildUser=${BUILD_USER} \
        -X github.com/prometheus/common/version.BuildDate=${BUILD_DATE}" \
      -o /out/kube-convergence-exporter ./cmd/kube-convergence-exporter

# Static binary, CA certificates, tzdata, /etc/passwd with nonroot (65532);
# no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="kube-convergence-exporter" \
      org.opencontainers.image.description="Prometheus exporter for the convergence and health SLOs of Kubernetes controllers" \
      org.opencontainers.image.source="https://github.com/kube-convergence/kube-convergence-exporter" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/kube-convergence-exporter /bin/kube-convergence-exporter
# Numeric, so that runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
EXPOSE 10329
ENTRYPOINT ["/bin/kube-convergence-exporter"]
