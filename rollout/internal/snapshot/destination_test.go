package snapshot

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseADestination(t *testing.T) {
	abs, err := filepath.Abs("backups")
	require.NoError(t, err)
	for _, tc := range []struct {
		raw, want, refused string
	}{
		{raw: "file:///var/backups/etcd", want: "file:///var/backups/etcd"},
		{raw: "backups", want: "file://" + filepath.ToSlash(abs)},
		{raw: "s3://rollbacks?region=eu-west-1&prefix=prod/", want: "s3://rollbacks?region=eu-west-1&prefix=prod/"},
		{raw: "gs://rollbacks", want: "gs://rollbacks"},
		{raw: "azblob://rollbacks", want: "azblob://rollbacks"},
		{raw: "", refused: "the URL is empty"},
		{raw: "ftp://host/dir", refused: `scheme "ftp" is not one of`},
		{raw: "file://otherhost/dir", refused: "names a host"},
		{raw: "s3://", refused: "needs a bucket name"},
		{raw: "s3://key:secret@rollbacks", refused: "carries user info"},
		{raw: "s3://rollbacks?aws_secret_access_key=x", refused: `parameter "aws_secret_access_key" looks like a credential`},
		{raw: "azblob://rollbacks?sas_token=x", refused: `"sas_token" looks like a credential`},
		{raw: "gs://rollbacks?X-Goog-Signature=x", refused: "looks like a credential"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			d, err := Parse(tc.raw)
			if tc.refused != "" {
				require.ErrorIs(t, err, ErrBadDestination)
				assert.Contains(t, err.Error(), tc.refused)
				assert.NotContains(t, err.Error(), "secret@", "the refusal does not repeat a credential")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, d.String())
		})
	}
}

func TestADestinationNamesItsObjectsWithoutItsOptions(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"file:///var/backups/etcd", "file:///var/backups/etcd/db/etcd/a.db"},
		{"s3://rollbacks?region=eu-west-1&prefix=prod/", "s3://rollbacks/prod/db/etcd/a.db"},
		{"gs://rollbacks", "gs://rollbacks/db/etcd/a.db"},
	} {
		d, err := Parse(tc.raw)
		require.NoError(t, err)
		assert.Equal(t, tc.want, d.Location("db/etcd/a.db"), tc.raw)
	}
}

// S3 is asked for server-side encryption unless the URL chooses its own or says sse=none; the other stores
// encrypt at rest by themselves and get the URL as given.
func TestTheStoreIsAskedForServerSideEncryption(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"s3://rollbacks?region=eu-west-1", "s3://rollbacks?region=eu-west-1&ssetype=AES256"},
		{"s3://rollbacks?ssetype=aws:kms&kmskeyid=alias/etcd", "s3://rollbacks?kmskeyid=alias%2Fetcd&ssetype=aws%3Akms"},
		{"s3://rollbacks?endpoint=http://127.0.0.1:8333&sse=none", "s3://rollbacks?endpoint=http%3A%2F%2F127.0.0.1%3A8333"},
		{"gs://rollbacks", "gs://rollbacks"},
	} {
		d, err := Parse(tc.raw)
		require.NoError(t, err)
		u := d.storeURL()
		assert.Equal(t, tc.want, u.String(), tc.raw)
	}
}
