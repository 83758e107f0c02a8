# shellcheck shell=bash
# Shared settings of the local cluster scripts (sourced by up.sh, down.sh and status.sh).
#
# Every port is overridable by env. The defaults sit below the kernel's ephemeral range (32768+), so an
# outgoing connection can never squat on one between two runs, and up.sh moves a default that is taken by
# something else on the machine to the next free port (an explicitly set port that is taken is an error).
# The ports actually used are written to $RUN_DIR/cluster.env for the harness and for people.

CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$CLUSTER_DIR/../.." && pwd)
TOOLS_DIR=${TOOLS_DIR:-$ROOT/.tools}
BIN_DIR=${BIN_DIR:-$TOOLS_DIR/bin}
RUN_DIR=${RUN_DIR:-$ROOT/tests/.run}
PIDS_DIR=$RUN_DIR/pids
LOGS_DIR=$RUN_DIR/logs
PKI_DIR=$RUN_DIR/pki
KUBECONFIG_FILE=$RUN_DIR/kubeconfig
NODE_NAME=${NODE_NAME:-kwok-node-0}
# up.sh recreates the run dir and down.sh empties it: refuse a directory that holds anything else.
case "$(realpath -m "$RUN_DIR")" in
  / | "$HOME" | "$ROOT" | "$ROOT/tests" | /tmp) echo "RUN_DIR=$RUN_DIR: refusing a run dir that holds other things" >&2; exit 2 ;;
esac

# lock_cluster serialises up.sh and down.sh on one run dir: two `make cluster-up` at once (engineers and
# their tests share the cluster) would otherwise each take the other's half-started processes for leftovers.
# The lock lives outside the run dir, which up.sh recreates; a nested call (up.sh runs down.sh) holds it
# already. Every process the scripts start closes the lock's descriptor (see start in up.sh): a cluster
# process that kept it would hold the lock for its whole life.
lock_cluster() {
  [ -n "${CLUSTER_LOCK_HELD:-}" ] && return
  local f
  f=/tmp/etcd-rollout-cluster-$(printf '%s' "$(realpath -m "$RUN_DIR")" | cksum | cut -d' ' -f1).run.lock
  exec 9>"$f"
  if ! flock -n 9; then
    log "another cluster-up/down on $RUN_DIR is running; waiting for it"
    flock -w 120 9 || die "gave up after 120 s waiting for $f"
  fi
  export CLUSTER_LOCK_HELD=1
}

log() { printf '[cluster %6.2fs] %s\n' "$(elapsed)" "$*" >&2; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }
_T0=$(date +%s%N)
elapsed() { local now; now=$(date +%s%N); printf '%d.%02d' $(((now - _T0) / 1000000000)) $((((now - _T0) / 10000000) % 100)); }

# port_in_use PORT: true when something listens on 127.0.0.1:PORT or on the wildcard address.
port_in_use() {
  ss -Htln "sport = :$1" 2>/dev/null | grep -q .
}

# alive PIDFILE: true when the pid in PIDFILE runs and is still the program the file was written for
# (its first line is the pid, its second the absolute path of the executable).
alive() {
  local f=$1 pid exe
  [ -f "$f" ] || return 1
  pid=$(sed -n 1p "$f"); exe=$(sed -n 2p "$f")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  # A rebuilt binary shows as "PATH (deleted)"; it is still the same program.
  [ -z "$exe" ] || [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$exe"* ]]
}

# gone PID: true when PID has exited. A zombie counts as gone: the processes up.sh starts are orphans
# whose reaper (pid 1) may collect them seconds later.
gone() {
  local state
  state=$(sed -n 's/^[0-9]* (.*) \([A-Z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null)
  [ -z "$state" ] || [ "$state" = Z ]
}

# ours: pids of every process whose command line names $RUN_DIR. Everything the cluster starts (the
# control plane, kwok, the member daemon and each etcd member) carries the run dir in its arguments, so
# this finds leftovers even when a pid file was lost.
ours() {
  local d pid
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = $$ ] && continue
    if { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null | grep -qF -- "$RUN_DIR/"; then echo "$pid"; fi
  done
}
