package snapshot

import "time"

// Record is what is known of one stored snapshot: kept next to it as <key>.json, and handed to the engine's
// outputs and summary. It holds no secret: the location is a destination URL Parse accepted.
type Record struct {
	// Location is the stored object (file:///var/backups/etcd/db/etcd/20261205T014106Z.db, s3://bucket/…).
	Location string `json:"location"`
	// Member is the pod it was taken through (the leader when taken), EtcdVersion that member's server version.
	Member      string `json:"member"`
	EtcdVersion string `json:"etcdVersion,omitempty"`
	ClusterID   string `json:"clusterID"`
	Facts
	// RevisionBefore is the revision read just before the snapshot began: Facts.Revision is at least this.
	RevisionBefore int64     `json:"revisionBefore"`
	TakenAt        time.Time `json:"takenAt"`
	// Seconds is how long the transfer from etcd took; MBPerSecond its rate.
	Seconds     float64 `json:"seconds"`
	MBPerSecond float64 `json:"mbPerSecond"`
}
