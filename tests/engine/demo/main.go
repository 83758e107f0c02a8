// Command demo prepares `make demo`: on the running local cluster it creates a 3-member etcd StatefulSet
// in a fresh namespace etcd-demo-*, locked at partition = replicas (earlier demo namespaces are deleted
// first), and changes its pod template, so the StatefulSet has a new revision that nothing rolls until
// etcd-rollout does. It prints the namespace on stdout and its story on stderr.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

const prefix = "etcd-demo"

func main() {
	ns, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	fmt.Println(ns)
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "demo: "+format+"\n", args...) }

func run() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := harness.Open("")
	if err != nil {
		return "", err
	}
	list, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing namespaces: %w", err)
	}
	for _, ns := range list.Items {
		if strings.HasPrefix(ns.Name, prefix+"-") && ns.DeletionTimestamp == nil {
			say("deleting the previous demo namespace %s", ns.Name)
			if err := c.DeleteNamespace(ctx, ns.Name); err != nil {
				return "", err
			}
		}
	}
	ns, err := c.CreateNamespace(ctx, prefix)
	if err != nil {
		return "", err
	}
	start := time.Now()
	e, err := c.CreateEtcd(ctx, ns, harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", Replicas: 3})
	if err != nil {
		return "", err
	}
	say("created a 3-member etcd StatefulSet %s/etcd, locked at partition 3, healthy in %s", ns, time.Since(start).Round(100*time.Millisecond))
	value := time.Now().UTC().Format(time.RFC3339)
	rev, err := e.SetTemplateAnnotation(ctx, "demo.etcd-rollout/changed-at", value)
	if err != nil {
		return "", err
	}
	say("changed the pod template (annotation demo.etcd-rollout/changed-at=%s): new revision %s; nothing restarts until etcd-rollout runs", value, rev)
	return ns, nil
}
