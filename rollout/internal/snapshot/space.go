package snapshot

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// freeBytes is the space an unprivileged writer has left on dir's file system.
func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// spaceMargin is kept free beyond a snapshot's expected size: etcd's file can grow between the size read
// and the stream, and a full disk under the spool would also stall whatever else writes there.
const spaceMargin = 64 << 20

// checkSpace refuses a snapshot that would not fit in dir, before anything is streamed.
func checkSpace(dir string, expected int64, what string) error {
	free, err := freeBytes(dir)
	if err != nil {
		return err
	}
	need := uint64(expected) + uint64(expected)/10 + spaceMargin
	if free < need {
		return fmt.Errorf("%w: %s %s has %d MB free, the snapshot needs about %d MB (etcd's database is %d MB); free space there or choose another directory",
			ErrNoSpace, what, dir, free>>20, need>>20, expected>>20)
	}
	return nil
}
