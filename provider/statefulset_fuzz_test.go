package provider

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

var hashShape = regexp.MustCompile(`^[0-9a-f]{16}$`)

// FuzzTemplateHash feeds arbitrary JSON manifests to lockManifest and templateHash, the two steps by which the
// component owns a StatefulSet. Whatever the manifest, neither panics, and where both succeed: the hash has
// its fixed shape; locking (skipAwait, partition, name, serviceName) changes no byte of the template, so it
// never causes a roll by itself; locking twice is locking once; scaling does not change the hash; and the
// hash does not depend on the order of keys or on a JSON round trip, so the same manifest from another
// language SDK rolls nothing.
func FuzzTemplateHash(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"etcd"},"spec":{"replicas":3,"serviceName":"etcd","template":{"spec":{"containers":[{"image":"etcd:v3.6.8"}]}}}}`))
	f.Add([]byte(`{"spec":{"replicas":1,"template":{"metadata":{"annotations":{"b":"1","a":"2"}}}}}`))
	f.Add([]byte(`{"spec":{"replicas":3,"template":null}}`))
	f.Add([]byte(`{"spec":{"replicas":2.5,"template":{}}}`))
	f.Add([]byte(`{"metadata":{"name":7},"spec":{"replicas":3,"template":{"x":[1,2.0,"3",true,null,{}]}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil || m == nil {
			return
		}
		original, err := json.Marshal(m)
		require.NoError(t, err)

		hash, hashErr := templateHash(m)
		if hashErr == nil {
			require.Regexp(t, hashShape, hash)
			var again map[string]any
			require.NoError(t, json.Unmarshal(original, &again))
			h2, err := templateHash(again)
			require.NoError(t, err)
			require.Equal(t, hash, h2, "a JSON round trip changes the hash")
		}

		locked, err := lockManifest(m, "etcd", "db", "etcd")
		after, _ := json.Marshal(m)
		require.JSONEq(t, string(original), string(after), "lockManifest modified its input")
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.Equal(t, skipAwaitValue, locked["metadata"].(map[string]any)["annotations"].(map[string]any)[skipAwaitAnnotation])
		spec := locked["spec"].(map[string]any)
		replicas, err := replicasOf(spec)
		require.NoError(t, err)
		require.Equal(t, map[string]any{"partition": replicas}, spec["updateStrategy"].(map[string]any)["rollingUpdate"])

		lockedHash, err := templateHash(locked)
		require.NoError(t, err, "a manifest lockManifest accepts has a template to hash")
		if hashErr == nil {
			require.Equal(t, hash, lockedHash, "locking changed the template hash")
		}

		twice, err := lockManifest(locked, "etcd", "db", "etcd")
		require.NoError(t, err, "a locked manifest locks again")
		a, _ := json.Marshal(locked)
		b, _ := json.Marshal(twice)
		require.JSONEq(t, string(a), string(b), "locking is idempotent")

		spec["replicas"] = float64(replicas + 2)
		scaled, err := templateHash(locked)
		require.NoError(t, err)
		require.Equal(t, lockedHash, scaled, "scaling changed the template hash")
	})
}
