#!/usr/bin/env bash
# down.sh stops the local cluster: only processes that up.sh or the member daemon started, found by their
# pid files, in reverse start order (the member daemon first, so it stops its etcd members itself; then any
# member whose daemon died; then kwok, the controller manager, the apiserver and its etcd). Each gets
# SIGTERM and, after 10 s, SIGKILL. Then it checks that no process naming the run dir is left; one that is
# (a pid file was lost) is killed and reported, and the exit status is 1 so that a leak never goes unseen.
# The run dir is removed except its logs. With --only-members it stops just the member daemon and its members.
set -uo pipefail
# shellcheck source=env.sh
source "$(dirname "$0")/env.sh"

lock_cluster

# stop PIDFILE: TERM, wait up to 10 s, KILL; the pid file goes once the process is gone.
stop() {
  local f=$1 name pid
  name=$(basename "$f" .pid); pid=$(sed -n 1p "$f")
  if alive "$f"; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do gone "$pid" && break; sleep 0.1; done
    if ! gone "$pid"; then
      log "$name ($pid) ignored SIGTERM for 10s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null
      for _ in $(seq 50); do gone "$pid" && break; sleep 0.1; done
    fi
    log "stopped $name ($pid)"
  fi
  rm -f "$f"
}

[ -d "$RUN_DIR" ] || { log "nothing to stop: $RUN_DIR does not exist"; exit 0; }
for name in etcd-members; do [ -f "$PIDS_DIR/$name.pid" ] && stop "$PIDS_DIR/$name.pid"; done
for f in "$PIDS_DIR"/members/*/*.pid; do [ -f "$f" ] && stop "$f"; done
# --only-members: up.sh restarts a rebuilt member daemon; the control plane and all state stay.
[ "${1:-}" = --only-members ] && exit 0
for name in azurite fake-gcs-server versitygw kwok kube-controller-manager kube-apiserver etcd; do
  [ -f "$PIDS_DIR/$name.pid" ] && stop "$PIDS_DIR/$name.pid"
done

rc=0
left=$(ours)
if [ -n "$left" ]; then
  for pid in $left; do
    log "leaked process $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-160); killing it"
    kill -KILL "$pid" 2>/dev/null
  done
  rc=1
fi
find "$RUN_DIR" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
log "cluster down (logs kept in $LOGS_DIR)"
exit $rc
