//go:build tools

// Package tools pins the etcd server and etcdctl built for the local test cluster and its members.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
