package rollout

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// RunIdentity names this run for the StatefulSet's Lease: host name, process id and random bytes, as
// "host/pid/3f9c2a1b". The host and pid tell a person refused by the Lease where the holder runs; the
// random part keeps two runs apart that share both (a pid reused after a restart, containers that each
// run the tool as pid 1 under the same host name). Without it a run could not tell a dead predecessor's
// Lease from its own and would not know the partition it left lowered is its to re-lock.
func RunIdentity() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown-host"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail (it crashes the program rather than return an error)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}
