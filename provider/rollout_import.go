package provider

import (
	"net/url"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// importedFallbackHash is the versionHash of an imported rollout whose StatefulSet has no updateRevision yet
// (its controller has not observed it): any value works, since a program's own versionHash replaces it.
const importedFallbackHash = "imported"

// importedArgs fills the inputs an import cannot be told, from the live StatefulSet: the governing Service,
// and the client port and TLS files etcd itself is started with. They are defaults a person checks in the code
// `pulumi import` prints; an etcd whose settings come from a config file keeps the plain-HTTP, 2379 defaults.
func importedArgs(in RolloutArgs, sts *appsv1.StatefulSet) RolloutArgs {
	in.ServiceName, in.VersionHash = in.StsName, importedFallbackHash
	if sts == nil {
		return in
	}
	if sts.Spec.ServiceName != "" {
		in.ServiceName = sts.Spec.ServiceName
	}
	if sts.Status.UpdateRevision != "" {
		in.VersionHash = sts.Status.UpdateRevision
	}
	c := rollout.EtcdContainer(sts.Spec.Template.Spec.Containers)
	if c == nil {
		return in
	}
	flags := rollout.EtcdFlagValues(c)
	if port := clientURLPort(flags["listen-client-urls"]); port != 0 && port != 2379 {
		in.ClientPort = &port
	}
	if ca, cert, key := flags["trusted-ca-file"], flags["cert-file"], flags["key-file"]; ca != "" && cert != "" && key != "" {
		in.TLS = &TLS{CaFile: ca, CertFile: cert, KeyFile: key}
	}
	return in
}

// clientURLPort is the port of the first client URL, 0 when there is none.
func clientURLPort(urls string) int {
	first, _, _ := strings.Cut(urls, ",")
	u, err := url.Parse(strings.TrimSpace(first))
	if err != nil {
		return 0
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return 0
	}
	return port
}
