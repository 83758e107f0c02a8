#!/usr/bin/env bash
# Builds the release artifacts of one version into dist/ (ignored by git), the names the pulumi CLI, npm, pip
# and the Go toolchain expect:
#   pulumi-resource-etcd-rollout-v<V>-<os>-<arch>.tar.gz   linux and darwin, amd64 and arm64: the plugin that
#                                                          `pulumi plugin install` and pluginDownloadURL fetch
#   etcd-rollout-v<V>-<os>-<arch>.tar.gz                   the CLI (also the kubectl plugin, once renamed)
#   checksums.txt                                          sha256 of every file above
#   pulumi-etcd-rollout-<V>.tgz                            the npm package (built JS and .d.ts): npm install ./<it>
#   pulumi_etcd_rollout-<V>-py3-none-any.whl, .tar.gz      the Python wheel and sdist
# The Go SDK is no file: it is the module github.com/etcd-rollout/pulumi-etcd-rollout/sdk, which
# `go get …/sdk@v<V>` resolves once the repository is tagged sdk/v<V> (a module in a subdirectory is tagged
# with its directory as the prefix).
#
# The version comes from one place, the VERSION file (make passes it as V); the schema and the SDKs carry the
# version the provider was built with (make sdks), and this script refuses a VERSION they do not carry.
#
# Hand-written rather than goreleaser: the goreleaser module this machine's proxy serves is no approved
# release, and the four go builds, tar, sha256sum, npm pack and python -m build are what it would run.
#
# usage: tools/dist.sh VERSION      env: DIST_PLATFORMS (default: the four above; make dist-host: this machine's)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
V=${1:?usage: tools/dist.sh VERSION}
TOOLS_DIR=${TOOLS_DIR:-$ROOT/.tools}
DIST=$ROOT/dist
STAGE=$DIST/.stage
log() { printf '[dist] %s\n' "$*" >&2; }

for f in schema.json sdk/nodejs/package.json sdk/python/pyproject.toml sdk/go/etcdrollout/pulumi-plugin.json; do
  if ! grep -q "\"$V\"" "$ROOT/$f"; then
    echo "dist: $f does not carry version $V (VERSION): run make sdks and commit what it changes" >&2
    exit 2
  fi
done

rm -rf "$DIST" && mkdir -p "$STAGE"
cd "$ROOT"

# The plugin and the CLI, statically linked, for each platform the pulumi CLI downloads plugins for.
for platform in ${DIST_PLATFORMS:-linux-amd64 linux-arm64 darwin-amd64 darwin-arm64}; do
  os=${platform%-*} arch=${platform#*-}
  out=$STAGE/$platform
  mkdir -p "$out/plugin" "$out/cli"
  log "building the plugin and the CLI for $platform"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X github.com/etcd-rollout/pulumi-etcd-rollout/provider.Version=$V" \
    -o "$out/plugin/pulumi-resource-etcd-rollout" ./cmd/pulumi-resource-etcd-rollout
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-s -w -X main.version=$V" \
    -o "$out/cli/etcd-rollout" ./cmd/etcd-rollout
  cp README.md "$out/plugin/" # no PulumiPlugin.yaml: with it the CLI takes the tarball for a Go source plugin
  cp README.md "$out/cli/"
  tar -czf "$DIST/pulumi-resource-etcd-rollout-v$V-$platform.tar.gz" -C "$out/plugin" .
  tar -czf "$DIST/etcd-rollout-v$V-$platform.tar.gz" -C "$out/cli" .
done
(cd "$DIST" && sha256sum -- *.tar.gz > checksums.txt)

# The npm package: the generated TypeScript built with the pinned compiler of tests/e2e/node (make node-deps),
# packed from bin/ as the Pulumi SDKs publish theirs.
log "packing the npm package"
cp -r sdk/nodejs "$STAGE/nodejs"
ln -s "$TOOLS_DIR/node/node_modules" "$STAGE/nodejs/node_modules"
(cd "$STAGE/nodejs" && ./node_modules/.bin/tsc && cp package.json README.md bin/ && cd bin && npm pack --quiet --pack-destination "$DIST" >/dev/null)

# The Python wheel and sdist, built offline by a pinned `build` and setuptools in a venv of their own.
log "building the Python wheel and sdist"
venv=$TOOLS_DIR/dist-venv
if [ ! -x "$venv/bin/python" ] || ! cmp -s tools/dist-requirements.txt "$venv/requirements.txt"; then
  rm -rf "$venv" && python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --no-deps -r tools/dist-requirements.txt
  cp tools/dist-requirements.txt "$venv/requirements.txt"
fi
cp -r sdk/python "$STAGE/python"
cp sdk/nodejs/README.md "$STAGE/python/README.md" # pyproject's readme: the schema's description, as on npm
"$venv/bin/python" -m build --no-isolation --outdir "$DIST" "$STAGE/python" >/dev/null

rm -rf "$STAGE"
log "wrote $(ls "$DIST" | wc -l) files to dist/:"
ls -l "$DIST" >&2
