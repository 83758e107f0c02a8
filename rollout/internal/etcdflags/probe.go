// Package etcdflags asks etcd binaries which command-line flags they accept. It is how the flag table of the
// planner (internal/planner/etcdflags_table.go) is made and kept honest: the generator in gen/ probes every name that
// etcd's own sources mention, and a test in the planner probes the table again.
package etcdflags

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// undefined is what Go's flag package prints for a name the FlagSet does not register, before etcd exits 2.
const undefined = "flag provided but not defined"

// Accepts says whether binary's flag parser knows name. It runs `etcd --version --name=0`: etcd parses every
// flag, exits 2 on a name it does not register, and otherwise prints its version and exits before reading
// any other setting. A value the flag cannot take ("0" for a URL list) fails differently and still means the
// flag exists.
//
// --version itself is the probe's own flag: asked as --version=0 it would turn the version off and start a
// server, so it counts as accepted without a run. The binary runs in an empty directory of its own, so
// nothing it might write lands in the caller's tree.
func Accepts(ctx context.Context, binary, name string) (bool, error) {
	if name == "version" {
		return true, nil
	}
	if strings.Contains(binary, "/") {
		// It runs in another directory.
		abs, err := filepath.Abs(binary)
		if err != nil {
			return false, err
		}
		binary = abs
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "etcdflags-probe-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, "--version", "--"+name+"=0")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &out
	err = cmd.Run()
	switch {
	case strings.Contains(out.String(), undefined+": -"+name+"\n"):
		return false, nil
	case err == nil && strings.Contains(out.String(), "etcd Version:"):
		return true, nil
	case strings.Contains(out.String(), "-"+name):
		// An invalid value for a registered flag: "invalid value "0" for flag -listen-client-urls".
		return true, nil
	}
	return false, fmt.Errorf("%s --version --%s=0: %v: %s", binary, name, err, firstLine(out.String()))
}

// Accepted probes every candidate name against binary and returns those it accepts, sorted.
func Accepted(ctx context.Context, binary string, candidates []string) ([]string, error) {
	var out []string
	for _, name := range unique(candidates) {
		ok, err := Accepts(ctx, binary, name)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, name)
		}
	}
	return out, nil
}

// Version is the server version binary reports ("3.6.8").
func Version(ctx context.Context, binary string) (string, error) {
	out, err := exec.CommandContext(ctx, binary, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", binary, err)
	}
	m := regexp.MustCompile(`etcd Version: (\S+)`).FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version printed no version: %s", binary, firstLine(string(out)))
	}
	return string(m[1]), nil
}

// helpFlag is a flag as etcd's help text names it, at the start of a line.
var helpFlag = regexp.MustCompile(`(?m)^\s*--([a-z0-9][a-z0-9.-]*)`)

// HelpFlags lists the flags `etcd --help` describes. The help text is written by hand in etcd's sources
// (etcdmain/help.go), so it is a cross-check, not the registry: some flags are registered and not described.
func HelpFlags(ctx context.Context, binary string) ([]string, error) {
	out, err := exec.CommandContext(ctx, binary, "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --help: %w", binary, err)
	}
	var names []string
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		names = append(names, m[1])
	}
	return unique(names), nil
}

func unique(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
