package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// commit and commitTime are the build's commit and its time when the
// build stamps them with -ldflags (Taskfile's build, the Dockerfile): a
// build without the repository's .git (a container build) records no VCS
// data of its own.
//
//	go build -ldflags "-X github.com/fairwayhq/fairway/internal/cli.commit=$(git rev-parse HEAD)" ./cmd/fairway
var commit, commitTime string

// version describes this build: the module's version, the VCS revision and
// its time when the build recorded them, and the Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return formatVersion(info, commit, commitTime, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
}

// formatVersion writes what version says, from info (nil: none recorded)
// and the commit and its time stamped with -ldflags (used when info has
// none).
func formatVersion(info *debug.BuildInfo, stampedCommit, stampedTime, goVersion, platform string) string {
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
	rev, at := settings["vcs.revision"], settings["vcs.time"]
	switch {
	case rev != "":
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
	case stampedCommit != "":
		rev, at = stampedCommit, stampedTime
	default:
		rev = "unknown: built without the repository's VCS data (a container build, or from an archive); " +
			"'task build' stamps it, as does -ldflags \"-X github.com/fairwayhq/fairway/internal/cli.commit=$(git rev-parse HEAD)\""
	}
	fmt.Fprintf(&b, "revision %s\n", rev)
	if at != "" {
		fmt.Fprintf(&b, "time     %s\n", at)
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
