//go:build tools

// Package tools pins an etcd 3.5 server older than 3.5.32, the oldest 3.5 that etcd supports upgrading to 3.6
// from: the engine must refuse to upgrade a cluster running it, and only a real old member reports that version
// through its Status RPC.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
