//go:build tools

// Package tools pins the Google Cloud Storage emulator the local test cluster's scripts start beside it, so
// that snapshots go to gs:// through the same gocloud.dev code a user's bucket does (the Storage client
// behind it talks to STORAGE_EMULATOR_HOST instead of Google, the emulator hook it documents):
// fake-gcs-server (BSD-2-Clause), one Go binary serving the JSON API from a directory, with no Docker and no
// Google account. No server users run speaks GCS's API; this is the one its users test against.
package tools

import _ "github.com/fsouza/fake-gcs-server"
