package harness

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
)

// azuriteAccount and azuriteKey are Azurite's documented development account and its published key: a
// well-known value every Azurite user has, not a secret (tools/azurite/README.md).
const (
	azuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// AzureBlob is the Azure Blob Storage emulator tests/cluster/up.sh starts beside the cluster (Azurite, pinned
// in tools/azurite), with one container, made on first use. Snapshots go to it through the same azblob://
// URL and gocloud.dev code as to a user's container; the account and key come from the environment, as a
// user's do, never from the URL.
type AzureBlob struct {
	Host, Container string
}

// URL is an azblob:// destination in the container under prefix: the emulator's address (localemu, domain,
// plain http, which gocloud.dev allows for a local emulator only) and no credential.
func (a AzureBlob) URL(t testing.TB, prefix string) string {
	t.Helper()
	if a.Host == "" {
		t.Fatal("the local cluster has no Azure Blob emulator (an older tests/cluster/up.sh started it): run make cluster-down cluster-up")
	}
	a.ensureContainer(t)
	q := url.Values{"localemu": {"true"}, "domain": {a.Host}, "protocol": {"http"}, "prefix": {prefix + "/"}}
	return fmt.Sprintf("azblob://%s?%s", a.Container, q.Encode())
}

// Env is the emulator's account as environment entries, for a process the test starts (the CLI, pulumi).
func (a AzureBlob) Env() []string {
	return []string{"AZURE_STORAGE_ACCOUNT=" + azuriteAccount, "AZURE_STORAGE_KEY=" + azuriteKey}
}

var useAzureCredentials sync.Once

// UseCredentials puts the emulator's account in this test process's environment, where the Azure SDK behind
// gocloud.dev reads it. Set once and never unset, as S3.UseCredentials.
func (a AzureBlob) UseCredentials(t testing.TB) {
	t.Helper()
	useAzureCredentials.Do(func() {
		for _, kv := range a.Env() {
			k, v, _ := strings.Cut(kv, "=")
			_ = os.Setenv(k, v)
		}
	})
}

var azureContainers sync.Map

// ensureContainer makes the container, once per process: Azurite starts with none, and gocloud.dev makes
// none, as a user's container is made before it is used.
func (a AzureBlob) ensureContainer(t testing.TB) {
	t.Helper()
	if _, done := azureContainers.Load(a.Host + "/" + a.Container); done {
		return
	}
	cred, err := azblob.NewSharedKeyCredential(azuriteAccount, azuriteKey)
	if err != nil {
		t.Fatalf("the Azurite account: %v", err)
	}
	cli, err := azblob.NewClientWithSharedKeyCredential(fmt.Sprintf("http://%s/%s", a.Host, azuriteAccount), cred, nil)
	if err != nil {
		t.Fatalf("a client of Azurite at %s: %v", a.Host, err)
	}
	_, err = cli.CreateContainer(context.Background(), a.Container, &azblob.CreateContainerOptions{Metadata: map[string]*string{"purpose": to.Ptr("etcd-rollout-tests")}})
	if err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		t.Fatalf("making container %s in Azurite at %s: %v", a.Container, a.Host, err)
	}
	azureContainers.Store(a.Host+"/"+a.Container, true)
}
