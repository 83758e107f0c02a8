#!/usr/bin/env bash
# `make demo`, the README's main job: examples/yaml with the plain pulumi CLI in a project directory of its
# own, as a user runs a stack, on the local cluster (make cluster-up): `pulumi up` creates the etcd StatefulSet
# (3 members, partition-locked) and its EtcdRollingUpgrade, a pod-template change is shown by `pulumi preview
# --diff` (the members, their order and the leader moves) before `pulumi up` rolls it, then the outputs.
#
# The project is a copy of examples/yaml in tests/.run/demo/project whose Pulumi.yaml takes the plugins from
# this repository's build (plugins.providers); a user's stack installs the released plugin instead. Only one
# demo is kept: the previous one's stack is destroyed and its namespace deleted first.
#
# usage: tools/demo.sh       env: DEMO_COOLDOWN_SECONDS (default 2), TOOLS_DIR
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS_DIR=${TOOLS_DIR:-$ROOT/.tools}
DEMO_DIR=$ROOT/tests/.run/demo
KUBECONFIG_LOCAL=$ROOT/tests/.run/kubeconfig
export PATH=$TOOLS_DIR/bin:$PATH
export PULUMI_HOME=$DEMO_DIR/home PULUMI_CONFIG_PASSPHRASE=demo PULUMI_SKIP_UPDATE_CHECK=true \
  PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true PULUMI_BACKEND_URL=file://$DEMO_DIR/state
project=$DEMO_DIR/project
kc=(kubectl --kubeconfig "$KUBECONFIG_LOCAL")
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
started=$SECONDS

mkdir -p "$DEMO_DIR/state" "$project"
if [ -f "$DEMO_DIR/namespace" ] && [ -f "$project/Pulumi.yaml" ]; then
  old=$(cat "$DEMO_DIR/namespace")
  say "pulumi destroy of the previous demo (namespace $old)"
  if ! (cd "$project" && pulumi destroy --yes --skip-preview --stack demo && pulumi stack rm --yes --stack demo); then
    kept=$DEMO_DIR/state.$(date +%Y%m%d%H%M%S)
    mv "$DEMO_DIR/state" "$kept" && mkdir -p "$DEMO_DIR/state"
    echo "  could not destroy the previous demo's stack; its state is kept in $kept"
  fi
  "${kc[@]}" delete namespace "$old" --ignore-not-found --wait=false
fi
rm -rf "$project" && mkdir -p "$project"
cp "$ROOT/examples/yaml/Pulumi.yaml" "$project/"
cat >> "$project/Pulumi.yaml" <<EOF
# make demo: this repository's build of the plugins (a user's stack installs the released plugin instead).
plugins:
  providers:
    - name: etcd-rollout
      path: $ROOT/bin
    - name: kubernetes
      path: $TOOLS_DIR/bin
EOF

ns=etcd-demo-$(date +%H%M%S)
"${kc[@]}" create namespace "$ns" >/dev/null
echo "$ns" > "$DEMO_DIR/namespace"
cd "$project"
pulumi stack init demo >/dev/null
pulumi config set kubeconfig "$KUBECONFIG_LOCAL"
pulumi config set namespace "$ns"
pulumi config set cooldownSeconds "${DEMO_COOLDOWN_SECONDS:-2}"

say "pulumi up: the Service, the etcd StatefulSet (3 members, partition-locked) and EtcdRollingUpgrade in namespace $ns"
pulumi up --yes --skip-preview

say "change the pod template (podRevision 1 -> 2), then pulumi preview --diff: the plan, before anything restarts"
pulumi config set podRevision 2
pulumi preview --diff

say "pulumi up: roll the members one at a time, the leader moved off each one before it restarts"
rolled=$SECONDS
pulumi up --yes --skip-preview
roll_seconds=$((SECONDS - rolled))

say "outputs of the rollout"
pulumi stack output
printf '\nrolling up took %d s; the whole demo %d s\n' "$roll_seconds" $((SECONDS - started))
echo
echo "The local cluster is still up. Look around:"
echo "  kubectl --kubeconfig $KUBECONFIG_LOCAL -n $ns get sts,pods,leases"
echo "  kubectl --kubeconfig $KUBECONFIG_LOCAL -n $ns get events --field-selector involvedObject.kind=StatefulSet"
echo "  bin/etcd-rollout status --sts etcd -n $ns --kubeconfig $KUBECONFIG_LOCAL"
echo "  cd $project && PULUMI_HOME=$PULUMI_HOME PULUMI_BACKEND_URL=$PULUMI_BACKEND_URL PULUMI_CONFIG_PASSPHRASE=demo $TOOLS_DIR/bin/pulumi stack"
echo "Stop it with: make cluster-down"
