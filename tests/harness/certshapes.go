package harness

import (
	"fmt"
	"slices"
)

// CertShape is one form of DNS name that a member's server certificate can carry. Real clusters mint their
// certificates with one shape or another, and a client must dial the name the certificate carries: the old
// Job dialled <pod>.<svc>.<ns>, cert-manager setups often carry only the .svc or the wildcard forms. Tests
// loop over AllCertShapes to check that the engine reaches every shape (and no other name).
type CertShape string

// The shapes, with <pod> every pod of the StatefulSet, <svc> its headless Service, <ns> its namespace.
const (
	CertShapePod                  CertShape = "<pod>.<svc>.<ns>"
	CertShapePodSvc               CertShape = "<pod>.<svc>.<ns>.svc"
	CertShapePodClusterLocal      CertShape = "<pod>.<svc>.<ns>.svc.cluster.local"
	CertShapeWildcard             CertShape = "*.<svc>.<ns>"
	CertShapeWildcardSvc          CertShape = "*.<svc>.<ns>.svc"
	CertShapeWildcardClusterLocal CertShape = "*.<svc>.<ns>.svc.cluster.local"
)

// AllCertShapes lists every CertShape, per-pod forms first.
var AllCertShapes = []CertShape{
	CertShapePod, CertShapePodSvc, CertShapePodClusterLocal,
	CertShapeWildcard, CertShapeWildcardSvc, CertShapeWildcardClusterLocal,
}

// suffix is what follows <svc>.<ns> in the shape.
func (s CertShape) suffix() string {
	switch s {
	case CertShapePodSvc, CertShapeWildcardSvc:
		return ".svc"
	case CertShapePodClusterLocal, CertShapeWildcardClusterLocal:
		return ".svc.cluster.local"
	}
	return ""
}

// Wildcard is true for the *.<svc>.<ns> forms, which name every member at once.
func (s CertShape) Wildcard() bool {
	return s == CertShapeWildcard || s == CertShapeWildcardSvc || s == CertShapeWildcardClusterLocal
}

// Names are the DNS names of shape s for the members of spec in namespace: one per pod (or per pod given),
// or the single wildcard. A wildcard cannot name chosen pods only.
func (s CertShape) Names(spec EtcdSpec, namespace string, pods ...string) ([]string, error) {
	if !slices.Contains(AllCertShapes, s) {
		return nil, fmt.Errorf("certificate shape %q: want one of %v", s, AllCertShapes)
	}
	base := spec.ServiceName + "." + namespace + s.suffix()
	if s.Wildcard() {
		if len(pods) > 0 {
			return nil, fmt.Errorf("certificate shape %s names every member; it cannot name only %v", s, pods)
		}
		return []string{"*." + base}, nil
	}
	if len(pods) == 0 {
		pods = spec.PodNames()
	}
	names := make([]string, len(pods))
	for i, pod := range pods {
		names[i] = pod + "." + base
	}
	return names, nil
}
