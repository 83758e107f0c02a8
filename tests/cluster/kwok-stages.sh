#!/usr/bin/env bash
# kwok-stages.sh STAGE_DIR prints the Stage rules kwok runs with. Standalone kwok ships none, so this
# assembles kwokctl's defaults from kwok's module (node initialize and lease heartbeat; pod ready, complete
# and delete), makes the stock pod-ready and pod-delete skip etcd member pods, and appends the member stages
# (member-stages.yaml), under which the member daemon decides readiness and when a deletion ends.
set -euo pipefail
S=$1
HERE=$(cd "$(dirname "$0")" && pwd)
EXCLUDE="    - key: '.metadata.labels[\"etcd-rollout.test/member\"]'\n      operator: 'DoesNotExist'"

# skip_members FILE: FILE with the exclusion as the first match expression; fails if there is no selector.
skip_members() {
  awk -v add="$EXCLUDE" '{ print } !done && /^    matchExpressions:$/ { print add; done = 1 }
    END { if (!done) { print "no matchExpressions in " FILENAME > "/dev/stderr"; exit 1 } }' "$1"
}

for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml pod/fast/pod-complete.yaml; do
  cat "$S/$f"; echo "---"
done
skip_members "$S/pod/fast/pod-ready.yaml"; echo "---"
skip_members "$S/pod/fast/pod-delete.yaml"; echo "---"
cat "$HERE/member-stages.yaml"
