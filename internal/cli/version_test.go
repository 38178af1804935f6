package cli

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFormatVersion: the module's version, the commit (modified or not)
// and its time when the build recorded them, else as -ldflags stamped
// them, else a revision that says why it is unknown and how to stamp it
// (never a bare "(devel)"); and the Go version.
func TestFormatVersion(t *testing.T) {
	require.Equal(t, "fairway (unknown)\nrevision unknown: built without the repository's VCS data (a container build, or from an archive); "+
		"'task build' stamps it, as does -ldflags \"-X github.com/fairwayhq/fairway/internal/cli.commit=$(git rev-parse HEAD)\"\ngo       go1.99 linux/amd64\n",
		formatVersion(nil, "", "", "go1.99", "linux/amd64"))
	devel := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}}
	require.Equal(t, "fairway (devel)\nrevision 89abcdef\ntime     2026-12-01T00:00:00Z\ngo       go1.26.1 linux/amd64\n",
		formatVersion(devel, "89abcdef", "2026-12-01T00:00:00Z", "go1.99", "linux/amd64"), "stamped with -ldflags")
	info := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-26T07:50:09Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	require.Equal(t, `fairway v1.4.0
revision 0123456789abcdef0123456789abcdef01234567 (modified)
time     2026-11-26T07:50:09Z
go       go1.26.1 darwin/arm64
`, formatVersion(info, "ignored", "", "go1.99", "darwin/arm64"))
}
