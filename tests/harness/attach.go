package harness

import "fmt"

// AttachEtcd is an Etcd for a StatefulSet that something else created (a Pulumi program), so a test can use
// the harness's fault hooks and checks on it. spec names it (Name, ServiceName, Replicas, TLS) as created.
func (c *Cluster) AttachEtcd(namespace string, spec EtcdSpec) (*Etcd, error) {
	spec, err := spec.WithDefaults()
	if err != nil {
		return nil, fmt.Errorf("attaching to %s/%s: %w", namespace, spec.Name, err)
	}
	return &Etcd{Spec: spec, Namespace: namespace, c: c}, nil
}
