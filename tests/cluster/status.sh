#!/usr/bin/env bash
# status.sh exits 0 when the local cluster runs and answers: every process of up.sh alive, the apiserver
# ready, the fake node Ready, the member daemon healthy and the S3 server and the GCS and Azure emulators answering. It prints what it found.
set -uo pipefail
# shellcheck source=env.sh
source "$(dirname "$0")/env.sh"

[ -f "$RUN_DIR/cluster.env" ] || { echo "cluster down: no $RUN_DIR/cluster.env"; exit 1; }
# shellcheck disable=SC1091
MEMBERS_URL=$(sed -n 's/^MEMBERS_URL=//p' "$RUN_DIR/cluster.env")
ok=0
for name in etcd kube-apiserver kube-controller-manager kwok etcd-members versitygw fake-gcs-server azurite; do
  if alive "$PIDS_DIR/$name.pid"; then echo "$name: running (pid $(sed -n 1p "$PIDS_DIR/$name.pid"))"
  else echo "$name: NOT running"; ok=1; fi
done
KC=(kubectl --kubeconfig "$KUBECONFIG_FILE" --request-timeout 5s)
if "${KC[@]}" get --raw /readyz >/dev/null 2>&1; then echo "apiserver: ready"; else echo "apiserver: NOT ready"; ok=1; fi
if "${KC[@]}" wait --for condition=Ready --timeout 2s "node/$NODE_NAME" >/dev/null 2>&1; then echo "node $NODE_NAME: Ready"
else echo "node $NODE_NAME: NOT Ready"; ok=1; fi
if curl -sf --max-time 5 "$MEMBERS_URL/healthz" >/dev/null; then echo "etcd-members: healthy ($MEMBERS_URL)"
else echo "etcd-members: NOT healthy"; ok=1; fi
S3_ENDPOINT=$(sed -n 's/^S3_ENDPOINT=//p' "$RUN_DIR/cluster.env")
if [ -n "$S3_ENDPOINT" ] && curl -s -o /dev/null --max-time 5 "$S3_ENDPOINT/"; then echo "versitygw: answering ($S3_ENDPOINT)"
else echo "versitygw: NOT answering"; ok=1; fi
GCS_EMULATOR_HOST=$(sed -n 's/^GCS_EMULATOR_HOST=//p' "$RUN_DIR/cluster.env")
if [ -n "$GCS_EMULATOR_HOST" ] && curl -sf -o /dev/null --max-time 5 "http://$GCS_EMULATOR_HOST/storage/v1/b?project=etcd-rollout-test"; then
  echo "fake-gcs-server: answering ($GCS_EMULATOR_HOST)"
else echo "fake-gcs-server: NOT answering"; ok=1; fi
AZURE_BLOB_HOST=$(sed -n 's/^AZURE_BLOB_HOST=//p' "$RUN_DIR/cluster.env")
if [ -n "$AZURE_BLOB_HOST" ] && curl -s -o /dev/null --max-time 5 "http://$AZURE_BLOB_HOST/"; then echo "azurite: answering ($AZURE_BLOB_HOST)"
else echo "azurite: NOT answering"; ok=1; fi
exit $ok
