//go:build tools

// Package tools pins the S3-compatible server the local test cluster's scripts start beside it, so that
// snapshots go to s3:// through the same gocloud.dev code a user's bucket does: versitygw, the Versity S3
// Gateway (Apache 2.0), whose posix backend serves a directory as buckets from one Go binary, with no
// Docker, no cluster of its own and no license that bars its use (MinIO's server is AGPL; SeaweedFS needs a
// master, a volume server and a filer; gofakes3 is a fake, not a server users run).
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
