package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestChaosClockOnlyInTheFaultBuild: with the variable set, a production
// build (no fairwaychaos tag, as go test builds by default) keeps the real
// clock; the fault suite's build (go test -tags fairwaychaos) is an hour
// ahead as the file says.
func TestChaosClockOnlyInTheFaultBuild(t *testing.T) {
	file := filepath.Join(t.TempDir(), "offset")
	if err := os.WriteFile(file, []byte("1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(chaosClockEnv, file)
	clock := chaosClock(slog.New(slog.DiscardHandler))
	if !chaosHooks {
		if clock != nil {
			t.Fatalf("the production build's coordinator clock follows %s (now %v)", chaosClockEnv, clock())
		}
		return
	}
	if clock == nil {
		t.Fatalf("the fault build ignores %s", chaosClockEnv)
	}
	if ahead := time.Until(clock()); ahead < 59*time.Minute || ahead > 61*time.Minute {
		t.Fatalf("the fault build's clock is %v ahead, want 1h", ahead)
	}
}
