package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// spec is one flag as its command defines it: the single source of its
// name, environment variable, default and usage. The flag set, the "(env X)"
// of the help text and docs/flags.md are all generated from it.
type spec struct {
	name  string
	env   string // "" when no environment variable sets the default
	usage string // without the "(env X)" suffix
	own   bool   // the program's own flag (workercmd.WithFlags), not this package's
}

// defined records the spec of a flag defined on f and returns the usage the
// flag set shows.
func (f *flags) defined(name, env, usage string) string {
	if f.specs == nil {
		f.specs = map[string]spec{}
	}
	f.specs[name] = spec{name: name, env: env, usage: usage, own: f.own}
	if env == "" {
		return usage
	}
	return usage + " (env " + env + ")"
}

// stringVar defines a string flag whose default env (when not empty)
// overrides. The default -h shows has its secrets masked (redactSecrets):
// an environment value such as REDIS_URL may hold a password.
func (f *flags) stringVar(p *string, name, env, def, usage string) {
	if env != "" {
		def = f.env(env, def)
	}
	f.StringVar(p, name, def, f.defined(name, env, usage))
	f.Lookup(name).DefValue = redactSecrets(def)
}

// redacted replaces a secret in a shown value.
const redacted = "xxxxx"

var (
	// secretParam is a URL query parameter naming a secret (password=,
	// sentinel_password=, token=, ...), with its value.
	secretParam = regexp.MustCompile(`(?i)([?&;][^=&;#]*(?:passw|secret|token|key)[^=&;#]*=)[^&;#]*`)
	// secretKeyword is a keyword/value pair naming a secret, as in a
	// PostgreSQL connection string ("host=db password=...").
	secretKeyword = regexp.MustCompile(`(?i)(^|\s)((?:password|passwd|secret|token)\s*=\s*)('[^']*'|\S*)`)
)

// redactSecrets masks the secrets a flag's value may hold: the password of
// a URL's user:password@ (everything from the first ':' of the userinfo to
// its last '@', so that a password holding '/', '?', '#' or '@' unencoded
// is masked whole), secret query parameters, and password=... keywords.
func redactSecrets(v string) string {
	if i := strings.Index(v, "://"); i >= 0 {
		rest := v[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if user, _, ok := strings.Cut(rest[:at], ":"); ok {
				v = v[:i+3] + user + ":" + redacted + rest[at:]
			}
		}
	}
	v = secretParam.ReplaceAllString(v, "${1}"+redacted)
	return secretKeyword.ReplaceAllString(v, "${1}${2}"+redacted)
}

// intVar defines an integer flag whose default env overrides.
func (f *flags) intVar(p *int, name, env string, def int, usage string) {
	if env != "" {
		def = f.envInt(env, def)
	}
	f.IntVar(p, name, def, f.defined(name, env, usage))
}

// durationVar defines a duration flag whose default env overrides.
func (f *flags) durationVar(p *time.Duration, name, env string, def time.Duration, usage string) {
	if env != "" {
		def = f.envDur(env, def)
	}
	f.DurationVar(p, name, def, f.defined(name, env, usage))
}

// boolVar defines a boolean flag whose default env overrides.
func (f *flags) boolVar(p *bool, name, env string, def bool, usage string) {
	if env != "" {
		def = f.envBool(env, def)
	}
	f.BoolVar(p, name, def, f.defined(name, env, usage))
}

// str is stringVar returning the value's address.
func (f *flags) str(name, env, def, usage string) *string {
	p := new(string)
	f.stringVar(p, name, env, def, usage)
	return p
}

// legacyEnv matches the "(env X)" a usage text written by hand ends with:
// flags defined with f.env and a hand-written suffix instead of a spec.
var legacyEnv = regexp.MustCompile(`\s*\(env ([A-Z0-9_]+)\)$`)

// flagDoc is one flag in the reference: what a spec says, with the default
// the flag set holds.
type flagDoc struct {
	spec
	def    string
	legacy bool // the env came from a hand-written "(env X)" suffix
}

// docs lists the flags of f in name order, from their specs; a flag defined
// without a spec has its env read from a hand-written suffix, if any.
func (f *flags) docs() []flagDoc {
	var out []flagDoc
	f.VisitAll(func(fl *flag.Flag) {
		d := flagDoc{def: fl.DefValue}
		if s, ok := f.specs[fl.Name]; ok {
			d.spec = s
		} else {
			d.spec = spec{name: fl.Name, usage: fl.Usage}
			if m := legacyEnv.FindStringSubmatch(fl.Usage); m != nil {
				d.env, d.usage, d.legacy = m[1], strings.TrimSuffix(fl.Usage, m[0]), true
			}
		}
		if _, isBool := fl.Value.(interface{ IsBoolFlag() bool }); isBool && d.def == "" {
			d.def = "false"
		}
		out = append(out, d)
	})
	return out
}

// describeCommands runs every command of the application with -h and an
// Env that, instead of printing the usage, hands the parsed flag set to
// describe. No command runs: each one parses its flags before doing
// anything.
func describeCommands(a *App, describe func(name string, f *flags)) {
	for _, name := range a.names() {
		e := &Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }, app: a}
		e.describe = func(f *flags) { describe(name, f) }
		// Every command stops at its flags: -h is ErrHelp.
		_ = a.commands[name].run(context.Background(), e, []string{"-h"})
	}
}

// FlagsMarkdown renders the flag reference of the application that opts
// make (docs/flags.md is cmd/worker's, written by ./gendocs): for each
// command, its flags with their environment variable, default and usage.
func FlagsMarkdown(opts ...Option) []byte {
	a := newApp(opts...)
	var b strings.Builder
	fmt.Fprintf(&b, "# Flags and environment variables of `%s`\n\n", a.name)
	b.WriteString("<!-- Generated by `go run ./internal/cli/gendocs` from the flag specs in internal/cli; do not edit. -->\n\n")
	b.WriteString("Every flag's default comes from its environment variable when that is set, and the flag given on the\n")
	b.WriteString("command line wins over both. A program built with package workercmd (see docs/worker.md, \"Your own\n")
	b.WriteString("binary\") has the same commands and flags, except those marked *program's own*: here cmd/worker's\n")
	b.WriteString("demo commands and the flags of its demo job types, which it adds with workercmd.WithCommand and\n")
	b.WriteString("workercmd.WithFlags, as a program adds its own.\n\n")
	describeCommands(a, func(name string, f *flags) {
		own := ""
		if a.own[name] {
			own = "*program's own:* "
		}
		fmt.Fprintf(&b, "## %s %s\n\n%s%s\n\n", a.name, name, own, a.commands[name].summary)
		docs := f.docs()
		if len(docs) == 0 {
			b.WriteString("No flags.\n\n")
			return
		}
		b.WriteString("| Flag | Environment | Default | Usage |\n|---|---|---|---|\n")
		for _, d := range docs {
			usage := d.usage
			if d.own {
				usage = "*program's own:* " + usage
			}
			fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", d.name, code(d.env), code(d.def), mdEscape(usage))
		}
		b.WriteString("\n")
	})
	return []byte(b.String())
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}
