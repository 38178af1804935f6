package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version describes this build: the module's version, the VCS revision and
// its time when the build recorded them, and the Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return formatVersion(info, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
}

// formatVersion writes what version says, from info (nil: none recorded).
func formatVersion(info *debug.BuildInfo, goVersion, platform string) string {
	var b strings.Builder
	mod := "(unknown)"
	if info != nil && info.Main.Version != "" {
		mod = info.Main.Version // v1.2.3, a pseudo-version, or (devel) in a checkout
	}
	fmt.Fprintf(&b, "fairway %s\n", mod)
	settings := map[string]string{}
	if info != nil {
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
		fmt.Fprintf(&b, "revision %s\n", rev)
	}
	if t := settings["vcs.time"]; t != "" {
		fmt.Fprintf(&b, "time     %s\n", t)
	}
	fmt.Fprintf(&b, "go       %s %s\n", goVersion, platform)
	return b.String()
}

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version: the module's, the commit and its time, and Go's",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprint(e.stdout, version())
			return err
		},
	}
}
