package cli

import (
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A command with many flags (fairway dev has some seventy) shows them in
// groups, the ones a newcomer needs first: the common ones named here,
// then the rest by the first part of their configuration key, in the order
// of flagSections.

// flagSection is a heading of a grouped --help, and the configuration key
// prefixes its flags have (none: the named common flags).
type flagSection struct {
	title    string
	prefixes []string
}

var flagSections = []flagSection{
	{"Common flags", nil},
	{"Scheduling (scheduler.*)", []string{"scheduler"}},
	{"Executor (executor.*)", []string{"executor"}},
	{"Coordinator: quotas, limits, retention (coordinator.*)", []string{"coordinator"}},
	{"NATS: connection and streams (nats.*)", []string{"nats"}},
	{"PostgreSQL (database.*)", []string{"database"}},
	{"Dashboard and HTTP (web.*)", []string{"web"}},
	{"Logs and tracing (log.*, tracing.*)", []string{"log", "tracing"}},
}

// commonFlags are the flags shown first, in this order.
var commonFlags = []string{"dev-dir", "nats-addr", "pg-port", "http-addr", "web-addr", "tenants", "database-url", "nats-url", "config"}

// configKeyInUsage finds a flag's configuration key in its usage text:
// "… (coordinator.quota.api-rate, env FAIRWAY_…)".
var configKeyInUsage = regexp.MustCompile(`\(([a-z-]+)\.[a-z.-]+, env `)

// groupedFlags makes cmd's --help list its flags in sections
// (flagSections), and returns it.
func groupedFlags(cmd *cobra.Command) *cobra.Command {
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		out := c.OutOrStderr()
		fmt.Fprintf(out, "Usage:\n  %s\n", c.UseLine())
		if c.HasExample() {
			fmt.Fprintf(out, "\nExamples:\n%s\n", c.Example)
		}
		sections := map[string]*pflag.FlagSet{}
		var order []string
		add := func(title string, f *pflag.Flag) {
			fs, ok := sections[title]
			if !ok {
				fs = pflag.NewFlagSet(title, pflag.ContinueOnError)
				fs.SortFlags = title != flagSections[0].title
				sections[title] = fs
				order = append(order, title)
			}
			fs.AddFlag(f)
		}
		for _, name := range commonFlags {
			if f := c.LocalFlags().Lookup(name); f != nil {
				add(flagSections[0].title, f)
			}
		}
		rest := map[string][]*pflag.Flag{}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if slices.Contains(commonFlags, f.Name) {
				return
			}
			prefix := ""
			if m := configKeyInUsage.FindStringSubmatch(f.Usage); m != nil {
				prefix = m[1]
			}
			rest[prefix] = append(rest[prefix], f)
		})
		for _, s := range flagSections[1:] {
			for _, prefix := range s.prefixes {
				for _, f := range rest[prefix] {
					add(s.title, f)
				}
				delete(rest, prefix)
			}
		}
		for _, prefix := range slices.Sorted(maps.Keys(rest)) { // no section of its own: help, keys of no section yet
			for _, f := range rest[prefix] {
				add("Other flags", f)
			}
		}
		for _, title := range order {
			fmt.Fprintf(out, "\n%s:\n%s", title, sections[title].FlagUsages())
		}
		if c.HasAvailableInheritedFlags() {
			fmt.Fprintf(out, "\nGlobal flags:\n%s", c.InheritedFlags().FlagUsages())
		}
		if c.HasParent() {
			fmt.Fprintf(out, "\nThe configuration keys and environment variables of each flag are in its description; 'fairway config print' shows them all.\n")
		}
		return nil
	})
	return cmd
}
