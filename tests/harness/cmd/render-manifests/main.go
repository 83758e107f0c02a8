// Command render-manifests writes tests/manifests/*.yaml from the harness's etcd template, so the files people
// apply by hand and the clusters the tests create cannot drift apart (manifest_test.go checks it).
//
//	go run ./tests/harness/cmd/render-manifests [DIR]   (default tests/manifests)
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

func main() {
	dir := "tests/manifests"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	for name, spec := range harness.ManifestFiles() {
		y, err := harness.RenderYAML(spec)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), y, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "render-manifests: %s: %v\n", name, err)
			os.Exit(1)
		}
		fmt.Println("wrote", filepath.Join(dir, name))
	}
}
