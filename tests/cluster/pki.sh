#!/usr/bin/env bash
# pki.sh DIR writes the cluster's certificates into DIR with openssl: one CA (EC P-256, valid 30 days: the
# run dir is recreated at every cluster-up), the serving certificates of kube-apiserver and kwok (SANs for
# 127.0.0.1 and the kubernetes Service names), client certificates for the admin user (system:masters), the
# controller manager and the apiserver's calls to kwok, and the service-account token signing key pair.
set -euo pipefail
cd "$1"
umask 077
DAYS=30

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1.key" 2>/dev/null; }
# sign NAME SUBJECT EXTENSIONS: a certificate for NAME.key, signed by the CA.
sign() {
  key "$1"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  printf '%b\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$DAYS" \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
SERVER='keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth'
CLIENT='keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'

key ca
openssl req -x509 -new -key ca.key -subj "/CN=etcd-rollout-local-ca" -days "$DAYS" -out ca.crt
sign apiserver "/CN=kube-apiserver" \
  "$SERVER\nsubjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
sign kwok "/CN=kwok" "$SERVER\nsubjectAltName=IP:127.0.0.1,DNS:localhost"
sign admin "/O=system:masters/CN=admin" "$CLIENT"
sign controller-manager "/CN=system:kube-controller-manager" "$CLIENT"
sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$CLIENT"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
openssl pkey -in sa.key -pubout -out sa.pub
rm -f ca.srl
