package rollout_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// Rolling a 3-member mTLS etcd StatefulSet after its pod template changed, with progress on stdout.
func Example() {
	restConfig, err := clientcmd.BuildConfigFromFlags("", "/path/to/kubeconfig")
	if err != nil {
		log.Fatal(err)
	}
	cfg := rollout.NewConfig("etcd", "prod", "etcd-headless")
	cfg.TLS = &rollout.TLSFiles{ // paths inside the etcd container; the engine reads the Secret mounted there
		CAFile:   "/var/lib/etcd-tls/ca.crt",
		CertFile: "/var/lib/etcd-tls/client.crt",
		KeyFile:  "/var/lib/etcd-tls/client.key",
	}
	cfg.Cooldown = 10 * time.Second

	engine, err := rollout.New(cfg, rollout.Options{
		RestConfig: restConfig,
		OnEvent:    func(ev rollout.Event) { fmt.Println(ev.Time.Format(time.TimeOnly), ev.Message) },
	})
	if err != nil {
		log.Fatal(err) // names the bad field
	}
	defer engine.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if _, plan, err := engine.Plan(ctx); err == nil {
		fmt.Println("plan:", plan) // what `pulumi preview` shows
	}
	res, err := engine.Run(ctx) // the partition is re-locked whatever happens
	fmt.Println(res.Summary())
	if err != nil {
		log.Fatal(err)
	}
}
