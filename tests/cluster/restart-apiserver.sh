#!/usr/bin/env bash
# restart-apiserver.sh stops the local cluster's kube-apiserver and starts it again with exactly the
# arguments it ran with (read back from /proc, so the flags and the port stay those up.sh chose), then
# waits until it answers /readyz. The fault tests use it to show that a rollout rides out an API server
# restart. Everything else keeps running: control-plane etcd, the controller manager, kwok and the member
# daemon reconnect by themselves. The API server drains long requests on SIGTERM; after 5 s it is killed,
# so a restart costs seconds, as a crashed and restarted API server does.
#
# usage: restart-apiserver.sh [DOWN_SECONDS]   (how long the API server stays away; default 0)
set -euo pipefail
# shellcheck source=env.sh
source "$(dirname "$0")/env.sh"

down_for=${1:-0}
lock_cluster
f=$PIDS_DIR/kube-apiserver.pid
alive "$f" || die "kube-apiserver is not running (no live pid in $f): run make cluster-up"
pid=$(sed -n 1p "$f"); exe=$(sed -n 2p "$f")
mapfile -d '' -t args <"/proc/$pid/cmdline"
args=("${args[@]:1}") # drop argv[0]

kill -TERM "$pid"
for _ in $(seq 50); do gone "$pid" && break; sleep 0.1; done
if ! gone "$pid"; then
  log "kube-apiserver ($pid) still draining 5s after SIGTERM; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for _ in $(seq 50); do gone "$pid" && break; sleep 0.1; done
fi
log "stopped kube-apiserver ($pid)"
sleep "$down_for"

setsid "$exe" "${args[@]}" >>"$LOGS_DIR/kube-apiserver.log" 2>&1 </dev/null 9>&- &
printf '%s\n%s\n' "$!" "$exe" >"$f"
deadline=$((SECONDS + 120))
until kubectl --kubeconfig "$KUBECONFIG_FILE" --request-timeout 2s get --raw /readyz >/dev/null 2>&1; do
  gone "$(sed -n 1p "$f")" && die "kube-apiserver exited during restart; see $LOGS_DIR/kube-apiserver.log"
  [ $SECONDS -lt $deadline ] || die "kube-apiserver not ready 120s after restart; see $LOGS_DIR/kube-apiserver.log"
  sleep 0.1
done
log "kube-apiserver restarted (pid $(sed -n 1p "$f"))"
