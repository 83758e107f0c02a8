package rollout

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunIdentity(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	a, b := RunIdentity(), RunIdentity()
	assert.True(t, strings.HasPrefix(a, host+"/"+strconv.Itoa(os.Getpid())+"/"), "%q names the host and process", a)
	assert.Regexp(t, `/[0-9a-f]{8}$`, a)
	assert.NotEqual(t, a, b, "two runs of one process on one host are still two holders")
	assert.NotEqual(t, NewConfig("etcd", "db", "etcd").Holder, NewConfig("etcd", "db", "etcd").Holder)
}
