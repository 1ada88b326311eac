#!/usr/bin/env bash
# Builds the pinned real components into .bin/ (ignored by git), skipping a
# component whose binaries are already built from the same pins. A stamp per
# component records the hash of its go.mod and go.sum.
#
# usage: tools/build.sh [component...]   (default: all)
#   components: kube etcd kwok prometheus alertmanager helm flux cyclonedx
#   (cyclonedx, the SBOM generator of make release, is built only when
#   named: make tools and make test do not need it)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.bin"
cache="$root/.cache"
mkdir -p "$bin" "$cache"

# Binaries each component provides; a component is rebuilt if one is missing.
declare -A provides=(
  [kube]="kube-apiserver kube-controller-manager kube-scheduler kubectl"
  [etcd]="etcd"
  [kwok]="kwok"
  [prometheus]="prometheus promtool"
  [alertmanager]="alertmanager"
  [helm]="helm"
  [flux]="kustomize-controller"
  [cyclonedx]="cyclonedx-gomod"
)
declare -A packages=(
  [kube]="k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl"
  [etcd]="."
  [kwok]="sigs.k8s.io/kwok/cmd/kwok"
  [prometheus]="github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool"
  [alertmanager]="github.com/prometheus/alertmanager/cmd/alertmanager"
  [helm]="helm.sh/helm/v4/cmd/helm"
  [flux]="github.com/fluxcd/kustomize-controller"
  [cyclonedx]="github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
)
# Rough cold build times on 2 cores, so a newcomer knows what to expect.
declare -A eta=([kube]="5 min" [etcd]="1 min" [kwok]="1 min" [prometheus]="6 min" [alertmanager]="2 min" [helm]="4 min" [flux]="5 min" [cyclonedx]="1 min")

# Kubernetes binaries report their version from ldflags (without them:
# v0.0.0-master), which clients such as kubectl and the exporter log.
kube_version=v1.37.2
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
# Helm likewise (without them `helm version` says only v4.3).
helm_version=v4.3.1
helm_ldflags="-X helm.sh/helm/v4/internal/version.version=$helm_version"
declare -A ldflags=([kube]="$kube_ldflags" [helm]="$helm_ldflags")

# Flux's CRDs, next to the binaries: kustomize-controller's own (its module
# ships config/crd/bases) and source-controller's, from the source-controller
# module of the version whose api module kustomize-controller requires. Only
# the CRDs are taken from it; source-controller is not built (the tests write
# its sources' status). internal/sandbox applies them.
flux_crds="$bin/flux-crds"
flux_crd_files="kustomize.toolkit.fluxcd.io_kustomizations.yaml source.toolkit.fluxcd.io_gitrepositories.yaml source.toolkit.fluxcd.io_ocirepositories.yaml source.toolkit.fluxcd.io_buckets.yaml source.toolkit.fluxcd.io_externalartifacts.yaml"

module_version() { # module_version <tools dir> <module path>
  sed -n "s|^[[:space:]]*\(require[[:space:]]\+\)\{0,1\}$2[[:space:]]\+\(v[^[:space:]]*\).*|\2|p" "$root/tools/$1/go.mod" | head -1
}

module_dir() { # module_dir <tools dir> <module>@<version>
  (cd "$root/tools/$1" && GOFLAGS=-mod=mod go mod download -json "$2" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
}

# ensure_flux_crds copies them unless the copy is of the pinned versions.
ensure_flux_crds() {
  local kc sc f want complete=1
  kc=$(module_version flux github.com/fluxcd/kustomize-controller)
  sc=$(module_version flux github.com/fluxcd/source-controller/api)
  [ -n "$kc" ] && [ -n "$sc" ] || { echo "tools/build.sh: no kustomize-controller or source-controller/api version in tools/flux/go.mod" >&2; exit 1; }
  want="kustomize-controller $kc, source-controller $sc"
  if [ "$(cat "$flux_crds/VERSIONS" 2>/dev/null)" = "$want" ]; then
    for f in $flux_crd_files; do [ -f "$flux_crds/$f" ] || complete=0; done
    [ "$complete" = 1 ] && return 0
  fi
  rm -rf "$flux_crds"
  mkdir -p "$flux_crds"
  cp "$(module_dir flux "github.com/fluxcd/kustomize-controller@$kc")"/config/crd/bases/kustomize.toolkit.fluxcd.io_*.yaml "$flux_crds/"
  cp "$(module_dir flux "github.com/fluxcd/source-controller@$sc")"/config/crd/bases/source.toolkit.fluxcd.io_*.yaml "$flux_crds/"
  chmod u+w "$flux_crds"/*
  for f in $flux_crd_files; do [ -f "$flux_crds/$f" ] || { echo "tools/build.sh: $f missing from the Flux modules" >&2; exit 1; }; done
  echo "$want" >"$flux_crds/VERSIONS"
  echo "tools: flux CRDs of $want in $flux_crds"
}

stamp_of() { { cat "$root/tools/$1/go.mod" "$root/tools/$1/go.sum"; echo "${ldflags[$1]:-}"; } | sha256sum | cut -c1-16; }

up_to_date() {
  local c=$1 b
  [ -f "$bin/.stamp-$c" ] && [ "$(cat "$bin/.stamp-$c")" = "$(stamp_of "$c")" ] || return 1
  for b in ${provides[$c]}; do [ -x "$bin/$b" ] || return 1; done
}

# Alertmanager's ui/web.go embeds ui/app/dist, which its module zip lacks:
# copy the module out of the module cache and add a placeholder page.
prepare_alertmanager() {
  local v dir src
  v=$(sed -n 's|^[[:space:]]*\(require[[:space:]]\+\)\{0,1\}github.com/prometheus/alertmanager[[:space:]]\+\(v[^[:space:]]*\).*|\2|p' "$root/tools/alertmanager/go.mod" | head -1)
  [ -n "$v" ] || { echo "tools/build.sh: no alertmanager version in tools/alertmanager/go.mod" >&2; exit 1; }
  src="$cache/alertmanager-$v"
  [ -f "$src/ui/app/dist/index.html" ] && return 0
  dir=$(cd "$root/tools/alertmanager" && GOFLAGS=-mod=mod go mod download -json "github.com/prometheus/alertmanager@$v" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  rm -rf "$src"
  cp -r "$dir" "$src"
  chmod -R u+w "$src"
  mkdir -p "$src/ui/app/dist"
  echo '<!doctype html><title>Alertmanager</title><p>UI assets are not built here; use the API under /api/v2/.</p>' >"$src/ui/app/dist/index.html"
}

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube etcd kwok prometheus alertmanager helm flux)
for c in "${components[@]}"; do
  [ -n "${provides[$c]:-}" ] || { echo "tools/build.sh: unknown component $c" >&2; exit 2; }
  [ "$c" = flux ] && ensure_flux_crds
  if up_to_date "$c"; then
    echo "tools: $c up to date (${provides[$c]})"
    continue
  fi
  echo "tools: building $c (${provides[$c]}); cold build takes about ${eta[$c]} on 2 cores..."
  start=$(date +%s)
  [ "$c" = alertmanager ] && prepare_alertmanager
  if [ "$c" = etcd ]; then
    (cd "$root/tools/etcd" && go build -trimpath -o "$bin/etcd" .)
  else
    # shellcheck disable=SC2086
    (cd "$root/tools/$c" && go build -trimpath -ldflags "${ldflags[$c]:-}" -o "$bin/" ${packages[$c]})
  fi
  stamp_of "$c" >"$bin/.stamp-$c"
  echo "tools: built $c in $(( $(date +%s) - start ))s"
done
