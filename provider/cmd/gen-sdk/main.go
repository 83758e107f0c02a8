// Command gen-sdk writes the SDK of one language from schema.json with Pulumi's own code generators.
//
// `pulumi package gen-sdk` hands generation to the language's plugin (pulumi-language-nodejs, -python, -go),
// and those plugins cannot be had on the machines this project builds on (the Go module proxy refuses their
// modules). The plugins only bind the schema and call the generators of pkg/v3/codegen, so this command does
// the same, pinned to the same pkg/v3 as the CLI.
//
// usage: go run ./provider/cmd/gen-sdk -schema schema.json -language nodejs|python|go -out sdk/nodejs
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/blang/semver"
	gogen "github.com/pulumi/pulumi/pkg/v3/codegen/go"
	nodejsgen "github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	pythongen "github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// tool is the generator name written into every file's "do not edit" header.
const tool = "pulumi"

func main() {
	schemaPath := flag.String("schema", "schema.json", "the package schema")
	language := flag.String("language", "", "nodejs, python or go")
	out := flag.String("out", "", "directory to write the SDK into (emptied first)")
	flag.Parse()
	if err := run(*schemaPath, *language, *out); err != nil {
		fmt.Fprintf(os.Stderr, "gen-sdk: %v\n", err)
		os.Exit(1)
	}
}

func run(schemaPath, language, out string) error {
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	raw, err := os.ReadFile(schemaPath)
	if err != nil {
		return err
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("parsing %s: %w", schemaPath, err)
	}
	pkg, diags, err := schema.BindSpec(spec, noPackages{}, schema.ValidationOptions{})
	if err != nil {
		return fmt.Errorf("binding %s: %w", schemaPath, err)
	}
	if diags.HasErrors() {
		return fmt.Errorf("binding %s: %v", schemaPath, diags)
	}

	var files map[string][]byte
	switch language {
	case "nodejs":
		files, err = nodejsgen.GeneratePackage(tool, pkg, nil, nil, false, noPackages{})
	case "python":
		files, err = pythongen.GeneratePackage(tool, pkg, nil, noPackages{})
	case "go":
		files, err = gogen.GeneratePackage(tool, pkg, nil)
	default:
		return fmt.Errorf("-language %q: want nodejs, python or go", language)
	}
	if err != nil {
		return fmt.Errorf("generating the %s SDK: %w", language, err)
	}
	return write(out, files)
}

// noPackages is the schema loader: the schema refers to no other package, so a request for one is a bug.
type noPackages struct{}

func (noPackages) LoadPackage(pkg string, _ *semver.Version) (*schema.Package, error) {
	return nil, fmt.Errorf("schema.json refers to package %q; gen-sdk loads no other package", pkg)
}

func (l noPackages) LoadPackageV2(_ context.Context, d *schema.PackageDescriptor) (*schema.Package, error) {
	return l.LoadPackage(d.Name, d.Version)
}

func (noPackages) LoadPackageReference(pkg string, _ *semver.Version) (schema.PackageReference, error) {
	return nil, fmt.Errorf("schema.json refers to package %q; gen-sdk loads no other package", pkg)
}

func (l noPackages) LoadPackageReferenceV2(_ context.Context, d *schema.PackageDescriptor) (schema.PackageReference, error) {
	return l.LoadPackageReference(d.Name, d.Version)
}

func write(out string, files map[string][]byte) error {
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}
