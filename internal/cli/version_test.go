package cli

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFormatVersion: the module's version, the commit (modified or not)
// and its time when the build recorded them, and the Go version.
func TestFormatVersion(t *testing.T) {
	require.Equal(t, "fairway (unknown)\ngo       go1.99 linux/amd64\n", formatVersion(nil, "go1.99", "linux/amd64"))
	info := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-26T07:50:09Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	require.Equal(t, `fairway v1.4.0
revision 0123456789abcdef0123456789abcdef01234567 (modified)
time     2026-11-26T07:50:09Z
go       go1.26.1 darwin/arm64
`, formatVersion(info, "go1.99", "darwin/arm64"))
}
