#!/usr/bin/env bash
# up.sh brings up the project's local Kubernetes cluster on 127.0.0.1, with no Docker:
#
#   etcd (control-plane storage) -> kube-apiserver (TLS, RBAC, admin client cert, service-account keys)
#   -> kube-controller-manager (only the controllers a StatefulSet needs, and the Job controller for the
#   old Job-based class of the migration test) -> kwok (one fake node that plays kubelet for pod status,
#   port-forward and exec; its stock pod-complete stage ends a Job's pod as Succeeded) -> etcd-members (real etcd processes behind the
#   pods of opted-in StatefulSets; see tests/harness/cmd/etcd-members), and beside them versitygw, an
#   S3-compatible server on a directory of the run dir with one bucket, etcd-snapshots, for snapshots to s3://
#   (its root credentials are drawn at each start and written 0600 to $RUN_DIR/s3.env, never to a command line),
#   fake-gcs-server, the Google Cloud Storage emulator, with the same bucket, for snapshots to gs://, and
#   Azurite, the Azure Blob Storage emulator (its blob service, on the machine's Node.js), for azblob://.
#
# State, certificates, logs and pid files live in $RUN_DIR (tests/.run). A healthy running cluster is left
# alone. A half-running one is torn down and started again. On any failure everything started so far is
# stopped, so a failed start never leaves processes behind.
#
# env: ETCD_PORT API_PORT KWOK_PORT MEMBERS_PORT S3_PORT GCS_PORT AZURE_PORT (see env.sh), MEMBER_PORTS (range for the etcd members,
# default 20000-28999), RUN_DIR, TOOLS_DIR, NODE_NAME.
set -euo pipefail
# shellcheck source=env.sh
source "$(dirname "$0")/env.sh"

MEMBERS_BIN=${MEMBERS_BIN:-$ROOT/bin/etcd-members}
lock_cluster
MEMBER_PORTS=${MEMBER_PORTS:-20000-28999}
CONTROLLERS=statefulset-controller,serviceaccount-controller,garbage-collector-controller,persistentvolumeclaim-protection-controller,namespace-controller,job-controller

# start NAME EXE ARGS...: run detached in its own session (a Ctrl-C in the caller's terminal does not reach
# it), log to $LOGS_DIR/NAME.log, record pid and executable in $PIDS_DIR/NAME.pid for down.sh.
start() {
  local name=$1 exe=$2; shift 2
  setsid "$exe" "$@" >>"$LOGS_DIR/$name.log" 2>&1 </dev/null 9>&- &
  printf '%s\n%s\n' "$!" "$exe" >"$PIDS_DIR/$name.pid"
}
# wait_for WHAT SECONDS CMD...: poll CMD until it succeeds; fail when the process behind WHAT dies.
wait_for() {
  local what=$1 name=$2 secs=$3; shift 3
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    # Not alive(): just after the fork the pid may still run bash or setsid, not yet the program.
    gone "$(sed -n 1p "$PIDS_DIR/$name.pid")" && die "$name exited during start; see $LOGS_DIR/$name.log"
    [ $SECONDS -lt $deadline ] || die "timed out after ${secs}s waiting for $what; see $LOGS_DIR/$name.log"
    sleep 0.1
  done
  log "$what ready"
}
# start_members PORT: the member daemon; with a Go build in between, make cluster-up restarts just this.
start_members() {
  start etcd-members "$MEMBERS_BIN" --kubeconfig "$KUBECONFIG_FILE" --run-dir "$RUN_DIR" \
    --listen "127.0.0.1:$1" --bin-dir "$BIN_DIR" --member-ports "$MEMBER_PORTS" --node "$NODE_NAME"
  wait_for "etcd-members on :$1" etcd-members 30 curl -sf "http://127.0.0.1:$1/healthz"
}

# healthy: status.sh passes. When every process runs but an answer is missing (a busy machine: other tests
# share the 2 cores), ask again for up to 30 s before calling the cluster broken and restarting it.
healthy() {
  [ -f "$RUN_DIR/cluster.env" ] || return 1
  local deadline=$((SECONDS + 30)) name
  until "$CLUSTER_DIR/status.sh" >/dev/null 2>&1; do
    for name in etcd kube-apiserver kube-controller-manager kwok etcd-members versitygw fake-gcs-server azurite; do
      alive "$PIDS_DIR/$name.pid" || return 1
    done
    [ $SECONDS -lt $deadline ] || return 1
    log "cluster processes run but do not all answer yet; asking again"
    sleep 2
  done
}

# --- already up?
if healthy; then
  if [[ "$(readlink "/proc/$(sed -n 1p "$PIDS_DIR/etcd-members.pid")/exe")" == *" (deleted)" ]]; then
    # The daemon binary was rebuilt: restart the daemon alone. It restarts the members of existing pods
    # from their data dirs.
    log "bin/etcd-members was rebuilt; restarting the member daemon"
    "$CLUSTER_DIR/down.sh" --only-members
    MEMBER_PORTS=$(sed -n 's/^MEMBER_PORTS=//p' "$RUN_DIR/cluster.env")
    NODE_NAME=$(sed -n 's/^NODE_NAME=//p' "$RUN_DIR/cluster.env")
    start_members "$(sed -n 's#^MEMBERS_URL=http://127.0.0.1:##p' "$RUN_DIR/cluster.env")"
  fi
  log "cluster already up and healthy; KUBECONFIG=$KUBECONFIG_FILE"
  exit 0
fi
if compgen -G "$PIDS_DIR/*.pid" >/dev/null || [ -n "$(ours)" ]; then
  log "found a half-running cluster in $RUN_DIR; stopping it first"
  "$CLUSTER_DIR/down.sh"
fi

for b in etcd kube-apiserver kube-controller-manager kwok versitygw fake-gcs-server; do
  [ -x "$BIN_DIR/$b" ] || die "missing $BIN_DIR/$b: run 'make tools' (a cold build takes about 15 minutes)"
done
[ -d "$TOOLS_DIR/kwok-kustomize/stage" ] || die "missing $TOOLS_DIR/kwok-kustomize: run 'make tools'"
AZURITE_MAIN=$TOOLS_DIR/azurite/node_modules/azurite/dist/src/blob/main.js
[ -f "$AZURITE_MAIN" ] || die "missing $AZURITE_MAIN: run 'make tools'"
[ -x "$MEMBERS_BIN" ] || die "missing $MEMBERS_BIN: run 'make cluster-up' (it builds the member daemon first)"

rm -rf "$RUN_DIR"
mkdir -p "$PIDS_DIR" "$LOGS_DIR" "$PKI_DIR" "$RUN_DIR/etcd" "$RUN_DIR/members"
chmod 700 "$RUN_DIR/etcd" "$PKI_DIR"

# Any failure from here on (a failed command or a die) stops everything started so far.
started=0
on_exit() {
  local rc=$?
  [ "$started" = 1 ] && return
  log "start failed (exit $rc); last lines of the logs in $LOGS_DIR:"
  for f in "$LOGS_DIR"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 5 "$f" >&2; }; done
  "$CLUSTER_DIR/down.sh" >&2 || true
  exit $((rc == 0 ? 1 : rc))
}
trap on_exit EXIT

# pick_port VAR DEFAULT: an explicitly set port must be free; a default that is taken moves to the next free
# port, so this cluster never collides with another service (or a second cluster in another run dir).
pick_port() {
  local var=$1 def=$2 port=${!1:-}
  if [ -n "$port" ]; then
    port_in_use "$port" && die "$var=$port is already in use on this machine"
  else
    port=$def
    while port_in_use "$port" || port_in_use $((port + 1)) || [[ " ${PICKED:-} " == *" $port "* ]]; do
      port=$((port + 2))
    done
  fi
  PICKED="${PICKED:-} $port $((port + 1))"
  printf -v "$var" '%s' "$port"
}
pick_port ETCD_PORT 18379 # and +1 for its peer port
pick_port API_PORT 18443
pick_port KWOK_PORT 18250
pick_port MEMBERS_PORT 18390
pick_port S3_PORT 18392
pick_port GCS_PORT 18394
pick_port AZURE_PORT 18396

# --- PKI and kubeconfigs
"$CLUSTER_DIR/pki.sh" "$PKI_DIR"
kubeconfig() { # FILE USER
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: etcd-rollout-local
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $PKI_DIR/ca.crt
users:
- name: $2
  user:
    client-certificate: $PKI_DIR/$2.crt
    client-key: $PKI_DIR/$2.key
contexts:
- name: etcd-rollout-local
  context: {cluster: etcd-rollout-local, user: $2, namespace: default}
current-context: etcd-rollout-local
EOF
  chmod 600 "$1"
}
kubeconfig "$KUBECONFIG_FILE" admin
kubeconfig "$PKI_DIR/controller-manager.kubeconfig" controller-manager
log "pki and kubeconfigs written"

KC=(kubectl --kubeconfig "$KUBECONFIG_FILE")

# --- control-plane etcd
start etcd "$BIN_DIR/etcd" --name control-plane --data-dir "$RUN_DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-cluster "control-plane=http://127.0.0.1:$((ETCD_PORT + 1))" \
  --unsafe-no-fsync --log-level warn
wait_for "control-plane etcd on :$ETCD_PORT" etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

# --- kube-apiserver. Loopback only: no endpoints for the kubernetes Service (endpoint-reconciler none),
# kwok reached by its InternalIP 127.0.0.1, priority-and-fairness off to spare the 2 cores.
start kube-apiserver "$BIN_DIR/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
  --endpoint-reconciler-type none \
  --tls-cert-file "$PKI_DIR/apiserver.crt" --tls-private-key-file "$PKI_DIR/apiserver.key" \
  --client-ca-file "$PKI_DIR/ca.crt" \
  --authorization-mode Node,RBAC \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI_DIR/sa.pub" --service-account-signing-key-file "$PKI_DIR/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 \
  --kubelet-preferred-address-types InternalIP \
  --kubelet-client-certificate "$PKI_DIR/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$PKI_DIR/apiserver-kubelet-client.key" \
  --enable-priority-and-fairness=false --profiling=false
wait_for "kube-apiserver on :$API_PORT" kube-apiserver 120 "${KC[@]}" get --raw /readyz

# --- kube-controller-manager: per-controller service-account credentials, as kubeadm runs it, so RBAC is real.
start kube-controller-manager "$BIN_DIR/kube-controller-manager" \
  --kubeconfig "$PKI_DIR/controller-manager.kubeconfig" \
  --controllers "$CONTROLLERS" --use-service-account-credentials \
  --service-account-private-key-file "$PKI_DIR/sa.key" --root-ca-file "$PKI_DIR/ca.crt" \
  --leader-elect=false --secure-port 0 --kube-api-qps 200 --kube-api-burst 400 --profiling=false

# --- kwok: CRDs first (standalone kwok does not install them), then the stage rules, then the node.
KUST=$TOOLS_DIR/kwok-kustomize
for c in portforwards clusterportforwards execs clusterexecs logs clusterlogs; do
  "${KC[@]}" apply -f "$KUST/crd/bases/kwok.x-k8s.io_$c.yaml" >/dev/null
done
"${KC[@]}" wait --for condition=established --timeout 30s \
  crd/portforwards.kwok.x-k8s.io crd/execs.kwok.x-k8s.io crd/clusterportforwards.kwok.x-k8s.io \
  crd/clusterexecs.kwok.x-k8s.io crd/logs.kwok.x-k8s.io crd/clusterlogs.kwok.x-k8s.io >/dev/null
"$CLUSTER_DIR/kwok-stages.sh" "$KUST/stage" >"$RUN_DIR/kwok-stages.yaml"
# kwok resolves exec commands with its own PATH: put the pinned etcdctl first.
PATH="$BIN_DIR:$PATH" start kwok "$BIN_DIR/kwok" --kubeconfig "$KUBECONFIG_FILE" --config "$RUN_DIR/kwok-stages.yaml" \
  --manage-all-nodes=true --cidr 10.0.0.0/16 \
  --node-ip 127.0.0.1 --node-name localhost --node-port "$KWOK_PORT" \
  --server-address "127.0.0.1:$KWOK_PORT" \
  --tls-cert-file "$PKI_DIR/kwok.crt" --tls-private-key-file "$PKI_DIR/kwok.key" \
  --enable-crds PortForward,ClusterPortForward,Exec,ClusterExec,Logs,ClusterLogs
wait_for "kwok on :$KWOK_PORT" kwok 30 curl -sf "http://127.0.0.1:$KWOK_PORT/healthz"
"${KC[@]}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $NODE_NAME
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {kubernetes.io/hostname: $NODE_NAME, kubernetes.io/os: linux, type: kwok}
EOF
wait_for "node $NODE_NAME" kwok 30 "${KC[@]}" wait --for condition=Ready --timeout 1s "node/$NODE_NAME"
wait_for "default service account" kube-controller-manager 30 "${KC[@]}" get serviceaccount default -n default

# --- the member daemon
start_members "$MEMBERS_PORT"

# --- versitygw: the bucket is a directory of its data dir; object metadata goes to a sidecar directory, so
# the run dir's filesystem needs no extended attributes.
mkdir -p "$RUN_DIR/s3/data/etcd-snapshots" "$RUN_DIR/s3/meta"
chmod -R 700 "$RUN_DIR/s3"
S3_KEY=rollout-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
S3_SECRET=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
(umask 077 && printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n' "$S3_KEY" "$S3_SECRET" >"$RUN_DIR/s3.env")
ROOT_ACCESS_KEY_ID=$S3_KEY ROOT_SECRET_ACCESS_KEY=$S3_SECRET start versitygw "$BIN_DIR/versitygw" \
  --port "127.0.0.1:$S3_PORT" --quiet posix --sidecar "$RUN_DIR/s3/meta" "$RUN_DIR/s3/data"
wait_for "versitygw (S3) on :$S3_PORT" versitygw 30 curl -s -o /dev/null "http://127.0.0.1:$S3_PORT/"

# --- fake-gcs-server: buckets are directories of its root. The Storage client behind gocloud.dev's gs:// goes
# to it when STORAGE_EMULATOR_HOST names it (the harness sets that, as a user's shell would set credentials);
# the emulator asks for none. The bucket is made through the JSON API, as a user would make theirs.
mkdir -p "$RUN_DIR/gcs" && chmod 700 "$RUN_DIR/gcs"
start fake-gcs-server "$BIN_DIR/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$GCS_PORT" \
  -backend filesystem -filesystem-root "$RUN_DIR/gcs" -public-host "127.0.0.1:$GCS_PORT" -log-level warn
GCS_API=http://127.0.0.1:$GCS_PORT/storage/v1/b?project=etcd-rollout-test
wait_for "fake-gcs-server (GCS) on :$GCS_PORT" fake-gcs-server 30 curl -sf -o /dev/null "$GCS_API"
curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' -d '{"name":"etcd-snapshots"}' "$GCS_API" ||
  die "fake-gcs-server did not create bucket etcd-snapshots"

# --- Azurite: its blob service alone, on the machine's Node.js (tools/azurite says why this version). Clients
# sign with its documented development account; the harness makes the container, as a user makes theirs.
mkdir -p "$RUN_DIR/azurite" && chmod 700 "$RUN_DIR/azurite"
start azurite "$(readlink -f "$(command -v node)")" "$AZURITE_MAIN" --blobHost 127.0.0.1 --blobPort "$AZURE_PORT" \
  --location "$RUN_DIR/azurite" --silent --skipApiVersionCheck --disableTelemetry
wait_for "azurite (Azure Blob) on :$AZURE_PORT" azurite 30 curl -s -o /dev/null "http://127.0.0.1:$AZURE_PORT/"

cat >"$RUN_DIR/cluster.env" <<EOF
# Written by tests/cluster/up.sh: what the running cluster uses. The harness reads this file.
KUBECONFIG=$KUBECONFIG_FILE
NODE_NAME=$NODE_NAME
ETCD_PORT=$ETCD_PORT
API_PORT=$API_PORT
KWOK_PORT=$KWOK_PORT
MEMBERS_URL=http://127.0.0.1:$MEMBERS_PORT
MEMBER_PORTS=$MEMBER_PORTS
S3_ENDPOINT=http://127.0.0.1:$S3_PORT
S3_BUCKET=etcd-snapshots
S3_CREDENTIALS=$RUN_DIR/s3.env
GCS_EMULATOR_HOST=127.0.0.1:$GCS_PORT
GCS_BUCKET=etcd-snapshots
AZURE_BLOB_HOST=127.0.0.1:$AZURE_PORT
AZURE_CONTAINER=etcd-snapshots
EOF
started=1
log "cluster up: export KUBECONFIG=$KUBECONFIG_FILE"
