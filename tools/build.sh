#!/usr/bin/env bash
# Builds the pinned binaries that the local test cluster, the tests and the examples need, from the Go module
# proxy, into $TOOLS_DIR/bin (default: .tools/bin, ignored by git). A binary already built at its pinned
# version is skipped, so a warm run takes seconds; a cold run on 2 cores takes about 15 minutes for the
# cluster binaries and about 20 more for the pulumi ones.
#
# usage: tools/build.sh [cluster|pulumi|all]...      (default: cluster)
#   cluster: kube-apiserver, kube-controller-manager, kwok, etcd + etcdctl + etcdutl (v3.6, the members'
#            default), etcd-v3.5 + etcdutl-v3.5 (the older version a test can upgrade from, and restore a snapshot
#            taken before the upgrade with), etcd-v3.5.21 (server only: a 3.5 below
#            the 3.5.32 that etcd supports upgrading to 3.6 from, for the test of the engine's refusal),
#            kubectl (the tests run the README's `kubectl wait` line with it), versitygw (the S3-compatible
#            server the cluster scripts start beside the cluster, for snapshots to s3://; tools/versitygw says why),
#            fake-gcs-server (the Google Cloud Storage emulator beside it, for gs://; tools/fake-gcs-server says why),
#            azurite (the Azure Blob Storage emulator beside it, for azblob://, from the npm registry into
#            $TOOLS_DIR/azurite; tools/azurite says why)
#   pulumi:  the pulumi CLI, pulumi-resource-kubernetes and pulumi-language-yaml (the language host a Pulumi YAML
#            project runs on with the plain CLI: the nodejs, python and go hosts are not served here)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS_DIR=${TOOLS_DIR:-$ROOT/.tools}
BIN=$TOOLS_DIR/bin
STAMPS=$TOOLS_DIR/stamps
mkdir -p "$BIN" "$STAMPS"

# Pinned versions. Keep in step with tools/*/go.mod (the Go module files are the real pins).
K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.8
ETCD_OLD_VERSION=v3.5.35
ETCD_PRE_FLOOR_VERSION=v3.5.21
KWOK_VERSION=v0.8.0
VERSITYGW_VERSION=v1.8.0
FAKE_GCS_SERVER_VERSION=v1.56.1
PULUMI_VERSION=v3.276.0
PULUMI_K8S_PROVIDER_VERSION=v4.0.0-20260115033456-f47bc2d6f199
PULUMI_K8S_SDK_VERSION=v4.25.0
PULUMI_K8S_PLUGIN_VERSION=4.25.0
PULUMI_YAML_VERSION=v1.25.0

log() { printf '[tools] %s\n' "$*" >&2; }

# fresh NAME VERSION: true when $BIN/NAME exists and was built at VERSION.
fresh() { [ -x "$BIN/$1" ] && [ "$(cat "$STAMPS/$1" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" > "$STAMPS/$1"; }

# build NAME VERSION DIR PKG [LDFLAGS]: go build PKG inside the tools module DIR into $BIN/NAME.
build() {
  local name=$1 version=$2 dir=$3 pkg=$4 ldflags=${5:-}
  if fresh "$name" "$version"; then return 0; fi
  log "building $name $version"
  local start=$SECONDS
  (cd "$ROOT/tools/$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$BIN/$name.tmp" "$pkg")
  mv "$BIN/$name.tmp" "$BIN/$name"
  stamp "$name" "$version"
  log "built $name in $((SECONDS - start))s"
}

# npm_tool NAME: npm ci the pinned tools/NAME/package-lock.json into $TOOLS_DIR/NAME, once per lock file.
npm_tool() {
  local name=$1 version
  version=$(sha256sum "$ROOT/tools/$name/package-lock.json" | cut -c1-16)
  if [ -d "$TOOLS_DIR/$name/node_modules" ] && [ "$(cat "$STAMPS/$name" 2>/dev/null)" = "$version" ]; then return 0; fi
  log "installing $name (npm ci of tools/$name)"
  local start=$SECONDS
  rm -rf "$TOOLS_DIR/$name" && mkdir -p "$TOOLS_DIR/$name"
  cp "$ROOT/tools/$name/package.json" "$ROOT/tools/$name/package-lock.json" "$TOOLS_DIR/$name/"
  (cd "$TOOLS_DIR/$name" && npm ci --ignore-scripts --no-audit --no-fund >/dev/null)
  stamp "$name" "$version"
  log "installed $name in $((SECONDS - start))s"
}

build_cluster() {
  local minor; minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  local k8s_ld="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  build etcd "$ETCD_VERSION" etcd-v3.6 go.etcd.io/etcd/server/v3
  build etcdctl "$ETCD_VERSION" etcd-v3.6 go.etcd.io/etcd/etcdctl/v3
  build etcdutl "$ETCD_VERSION" etcd-v3.6 go.etcd.io/etcd/etcdutl/v3
  build kube-apiserver "$K8S_VERSION" k8s k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ld"
  build kube-controller-manager "$K8S_VERSION" k8s k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ld"
  build kubectl "$K8S_VERSION" k8s k8s.io/kubernetes/cmd/kubectl "$k8s_ld"
  build etcd-v3.5 "$ETCD_OLD_VERSION" etcd-v3.5 go.etcd.io/etcd/server/v3
  build etcdutl-v3.5 "$ETCD_OLD_VERSION" etcd-v3.5 go.etcd.io/etcd/etcdutl/v3
  # Named etcd-v<version>: the member daemon runs a pod whose version annotation is a full version by that name.
  build "etcd-$ETCD_PRE_FLOOR_VERSION" "$ETCD_PRE_FLOOR_VERSION" "etcd-$ETCD_PRE_FLOOR_VERSION" go.etcd.io/etcd/server/v3
  build versitygw "$VERSITYGW_VERSION" versitygw github.com/versity/versitygw/cmd/versitygw
  build fake-gcs-server "$FAKE_GCS_SERVER_VERSION" fake-gcs-server github.com/fsouza/fake-gcs-server
  npm_tool azurite
  if ! fresh kwok "$KWOK_VERSION"; then
    log "building kwok $KWOK_VERSION"
    GOBIN=$BIN go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
    stamp kwok "$KWOK_VERSION"
  fi
  # kwok's Stage rules and CRDs live in its module; the cluster scripts read them from here.
  local kwok_dir; kwok_dir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  rm -rf "$TOOLS_DIR/kwok-kustomize"; cp -r "$kwok_dir/kustomize" "$TOOLS_DIR/kwok-kustomize"; chmod -R u+w "$TOOLS_DIR/kwok-kustomize"
}

build_pulumi() {
  build pulumi "$PULUMI_VERSION" pulumi github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
    "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION"
  if ! fresh pulumi-resource-kubernetes "$PULUMI_K8S_PROVIDER_VERSION"; then
    # The provider's main embeds files that its go:generate step writes and its module zip lacks, so its
    # four cmd files are copied into the tools module and generated there (not committed: they are 5 MB).
    local dir=$ROOT/tools/pulumi-kubernetes mod cmd
    mod=$(cd "$dir" && go mod download -json "github.com/pulumi/pulumi-kubernetes/provider/v4@$PULUMI_K8S_PROVIDER_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    cmd=$dir/cmd/pulumi-resource-kubernetes
    mkdir -p "$cmd"
    for f in main.go generate.go schema.json terraform-mapping.json; do cp "$mod/cmd/pulumi-resource-kubernetes/$f" "$cmd/"; done
    chmod -R u+w "$cmd"
    (cd "$cmd" && VERSION=$PULUMI_K8S_PLUGIN_VERSION go run ./generate.go >/dev/null)
    build pulumi-resource-kubernetes "$PULUMI_K8S_PROVIDER_VERSION" pulumi-kubernetes ./cmd/pulumi-resource-kubernetes \
      "-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$PULUMI_K8S_PLUGIN_VERSION"
  fi
  if ! fresh pulumi-language-yaml "$PULUMI_YAML_VERSION"; then
    log "building pulumi-language-yaml $PULUMI_YAML_VERSION"
    local start=$SECONDS
    GOBIN=$BIN go install -trimpath -ldflags "-s -w" "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml@$PULUMI_YAML_VERSION"
    stamp pulumi-language-yaml "$PULUMI_YAML_VERSION"
    log "built pulumi-language-yaml in $((SECONDS - start))s"
  fi
}

targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(cluster)
for t in "${targets[@]}"; do
  case $t in
    cluster) build_cluster ;;
    pulumi) build_pulumi ;;
    all) build_cluster; build_pulumi ;;
    *) echo "unknown target $t (cluster|pulumi|all)" >&2; exit 2 ;;
  esac
done
