package planner

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

//go:generate go run ../etcdflags/gen -root ../../.. -out etcdflags_table.go

// ErrFlagRefused is wrapped (with ErrBlocked and ErrVersionPath: the template cannot go to that version as it is) when the pod template gives etcd a flag the version it rolls to
// does not accept: etcd would exit at start ("flag provided but not defined"), or, for an ETCD_* variable,
// start without the setting. Like ErrVersionPath it does not pass by waiting: the template must change.
var ErrFlagRefused = errors.New("etcd flag not accepted by the target version")

// etcdFlagSet is what one pinned etcd minor accepts: Release is the binary the table was probed from.
type etcdFlagSet struct {
	Release string
	Flags   []string
}

func (s etcdFlagSet) has(name string) bool {
	i := sort.SearchStrings(s.Flags, name)
	return i < len(s.Flags) && s.Flags[i] == name
}

// EtcdSetting is one setting the pod template gives etcd: a command-line flag or an ETCD_* variable.
type EtcdSetting struct {
	// Name is the flag's name without dashes ("feature-gates"), also for a variable (ETCD_FEATURE_GATES).
	Name string
	// As is how the template spells it: "--feature-gates" or "ETCD_FEATURE_GATES".
	As string
	// FromEnv marks a variable: etcd warns about one it does not know and starts without it.
	FromEnv bool
}

// EtcdSettings reads etcd's settings from the container: `--flag=value`, `--flag value` and `-flag` in its
// command and args (also inside a `sh -c "... etcd --flag ..."` script, from the etcd word on), and ETCD_*
// variables. Names only: the values are not judged. Variables etcd itself does not read as flags
// (ETCDCTL_*, ETCD_UNSUPPORTED_ARCH) are left out.
func EtcdSettings(c *corev1.Container) []EtcdSetting {
	if c == nil {
		return nil
	}
	var out []EtcdSetting
	seen := map[string]bool{}
	add := func(s EtcdSetting) {
		if !seen[s.As] {
			seen[s.As] = true
			out = append(out, s)
		}
	}
	for _, w := range etcdWords(c) {
		if name, _, _, ok := flagWord(w); ok {
			add(EtcdSetting{Name: name, As: "--" + name})
		}
	}
	for _, e := range c.Env {
		if name, ok := flagOfVariable(e.Name); ok {
			add(EtcdSetting{Name: name, As: e.Name, FromEnv: true})
		}
	}
	return out
}

// EtcdFlagValues reads the value etcd gets for each setting the container gives it, by flag name ("cert-file"),
// read as EtcdSettings reads the names: `--flag value` and `--flag=value`, "true" for a flag given alone, and
// ETCD_* variables set to a value (not from a Secret or field). A flag wins over its variable, as in etcd,
// and a repeated flag's last value wins. For checks of the template's own words (does etcd serve TLS);
// values are never logged.
func EtcdFlagValues(c *corev1.Container) map[string]string {
	values := map[string]string{}
	if c == nil {
		return values
	}
	for _, e := range c.Env {
		if name, ok := flagOfVariable(e.Name); ok && e.ValueFrom == nil {
			values[name] = e.Value
		}
	}
	words := etcdWords(c)
	for i, w := range words {
		name, value, hasValue, ok := flagWord(w)
		switch {
		case !ok:
			continue
		case !hasValue && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-"):
			value = words[i+1] // etcd takes no positional arguments: the next word is the flag's value
		case !hasValue:
			value = "true"
		}
		values[name] = value
	}
	return values
}

// StartsEtcdVisibly says the container's own words start etcd (its command is etcd, or a shell one-liner that
// runs it) and every ETCD_* variable's value is in the spec: then a setting none of them gives is one etcd
// starts without. A script whose content is elsewhere, a variable from a ConfigMap or Secret, or a config
// file may give it: then nobody can tell from the spec.
func StartsEtcdVisibly(c *corev1.Container) bool {
	words := append(append([]string{}, c.Command...), c.Args...)
	switch {
	case len(words) == 0 || EtcdFlagValues(c)["config-file"] != "":
		return false
	case isShell(words[0]):
		runsEtcd := slices.ContainsFunc(words, func(w string) bool {
			return slices.ContainsFunc(strings.Fields(w), func(f string) bool { return path.Base(f) == "etcd" })
		})
		if !runsEtcd {
			return false
		}
	case path.Base(words[0]) != "etcd":
		return false
	}
	for _, e := range c.Env {
		if _, ok := flagOfVariable(e.Name); ok && e.ValueFrom != nil {
			return false
		}
	}
	return len(c.EnvFrom) == 0
}

// PeerURLFromPodIP says how the container builds etcd's advertised peer URL from the pod's IP: a reference,
// $(VAR), $VAR or ${VAR}, to a variable the downward API sets from status.podIP (or podIPs), or the shell's
// `hostname -i`; "" when it does not.
func PeerURLFromPodIP(c *corev1.Container) string {
	value := EtcdFlagValues(c)["initial-advertise-peer-urls"]
	script := strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || !strings.HasPrefix(e.ValueFrom.FieldRef.FieldPath, "status.podIP") {
			continue
		}
		for _, ref := range []string{"$(" + e.Name + ")", "${" + e.Name + "}", "$" + e.Name} {
			if strings.Contains(value, ref) {
				return fmt.Sprintf("--initial-advertise-peer-urls=%s, %s from %s", value, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
	}
	for _, ip := range []string{"hostname -i", "hostname -I", "hostname --ip-address"} {
		if strings.Contains(value, "$(") && strings.Contains(script, ip) {
			return fmt.Sprintf("--initial-advertise-peer-urls=%s, from `%s`", value, ip)
		}
	}
	return ""
}

// etcdWords is what etcd is started with: the container's command and args, or, for a `sh -c` script, the
// script's words after the word naming etcd, up to "--".
func etcdWords(c *corev1.Container) []string {
	words := append(append([]string{}, c.Command...), c.Args...)
	if len(words) >= 3 && isShell(words[0]) {
		// sh -c 'exec etcd --name=$(HOSTNAME) ...': the flags are the script's words after "etcd".
		for i, w := range words {
			if shellCommandOption(w) && i+1 < len(words) {
				words = shellWords(words[i+1])
				break
			}
		}
	}
	if end := slices.Index(words, "--"); end >= 0 {
		words = words[:end]
	}
	return words
}

// shellCommandOption says w is a shell's -c, alone or among other one-letter options ("-ec", "-xc", "-euc"):
// the word after it is the script (the harness's emptyDir template runs sh -ec, and read -ec as etcd's flag).
func shellCommandOption(w string) bool {
	opts, ok := strings.CutPrefix(w, "-")
	if !ok || opts == "" || strings.HasPrefix(opts, "-") || !strings.Contains(opts, "c") {
		return false
	}
	for _, r := range opts {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

// flagWord reads one word as a flag: its name without dashes and, for --flag=value, its value. ok is false
// for a word that is no flag (a value, the program) or whose name a script would still expand.
func flagWord(w string) (name, value string, hasValue, ok bool) {
	if !strings.HasPrefix(w, "-") || w == "-" {
		return "", "", false, false
	}
	name, value, hasValue = strings.Cut(strings.TrimLeft(w, "-"), "=")
	if name == "" || strings.ContainsAny(name, " $\"'") {
		return "", "", false, false
	}
	return name, value, hasValue, true
}

// flagOfVariable is the flag an ETCD_* variable sets (ETCD_CERT_FILE: cert-file); ok is false for variables
// etcd does not read as flags (ETCDCTL_*, ETCD_UNSUPPORTED_ARCH, anything else).
func flagOfVariable(variable string) (string, bool) {
	k, ok := strings.CutPrefix(variable, "ETCD_")
	if !ok || k == "" || variable == "ETCD_UNSUPPORTED_ARCH" {
		return "", false
	}
	return strings.ReplaceAll(strings.ToLower(k), "_", "-"), true
}

func isShell(word string) bool {
	switch path.Base(word) {
	case "sh", "bash", "ash", "dash":
		return true
	}
	return false
}

// shellWords splits a script into words (whitespace, quotes stripped) and keeps those after the first
// word naming etcd, up to the end of that command (;, &&, ||, |).
func shellWords(script string) []string {
	fields := strings.Fields(strings.NewReplacer(`\`+"\n", " ", "'", "", `"`, "").Replace(script))
	var out []string
	in := false
	for _, f := range fields {
		switch {
		case !in && path.Base(f) == "etcd":
			in = true
		case in && (f == ";" || f == "&&" || f == "||" || f == "|"):
			return out
		case in:
			out = append(out, f)
		}
	}
	return out
}

// FlagRefusal is one setting the target version does not accept, with what to use there instead when etcd's
// sources name it.
type FlagRefusal struct {
	Setting EtcdSetting
	Instead string
}

// FlagsError lists every setting of a template that the target version refuses.
type FlagsError struct {
	Target   EtcdVersion
	Release  string // the pinned release the table was probed from, e.g. "3.5.35"
	Refusals []FlagRefusal
}

func (e *FlagsError) Error() string {
	parts := make([]string, 0, len(e.Refusals))
	for _, r := range e.Refusals {
		line := r.Setting.As
		if r.Setting.FromEnv {
			line += " (etcd would start without it)"
		}
		if r.Instead != "" {
			line += fmt.Sprintf(" (%d.%d calls it %s)", e.Target.Major, e.Target.Minor, r.Instead)
		}
		parts = append(parts, line)
	}
	return fmt.Sprintf("etcd %d.%d does not accept %s (checked against etcd %s's flags); change the pod template before rolling to %s",
		e.Target.Major, e.Target.Minor, strings.Join(parts, ", "), e.Release, e.Target)
}

// CheckFlags refuses the settings target's minor version does not accept: every unknown flag (etcd exits on
// it), and the ETCD_* variables that another pinned release reads as a flag (etcd would start without the
// setting). A minor with no table (anything but the pinned 3.5 and 3.6) is not judged: nil.
func CheckFlags(settings []EtcdSetting, target EtcdVersion) error {
	set, ok := etcdFlags[fmt.Sprintf("%d.%d", target.Major, target.Minor)]
	if !ok {
		return nil
	}
	var refusals []FlagRefusal
	for _, s := range settings {
		if set.has(s.Name) || (s.FromEnv && !anyReleaseHas(s.Name)) {
			// A variable no pinned release reads is not an etcd setting (a script's own ETCD_SOMETHING):
			// etcd only warns about it, whatever version runs.
			continue
		}
		refusals = append(refusals, FlagRefusal{Setting: s, Instead: insteadOf(set, s.Name)})
	}
	if len(refusals) == 0 {
		return nil
	}
	return &FlagsError{Target: target, Release: set.Release, Refusals: refusals}
}

func anyReleaseHas(name string) bool {
	for _, set := range etcdFlags {
		if set.has(name) {
			return true
		}
	}
	return false
}

// insteadOf names the flag set's spelling of name, when etcd renamed it between 3.5 and 3.6: forward, the
// replacement 3.6's deprecation message names; backward, the 3.5 flag 3.6 renamed into name.
func insteadOf(set etcdFlagSet, name string) string {
	if r, ok := etcdFlagReplacements[name]; ok && set.has(strings.TrimPrefix(strings.SplitN(r, "=", 2)[0], "--")) {
		return r
	}
	for old, r := range etcdFlagReplacements {
		if r == "--"+name && set.has(old) {
			return "--" + old
		}
	}
	return ""
}

// CheckContainerFlags is CheckFlags for the etcd container of a pod template.
func CheckContainerFlags(c *corev1.Container, target EtcdVersion) error {
	return CheckFlags(EtcdSettings(c), target)
}
