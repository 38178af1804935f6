package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/heavytest"
)

var (
	long   = flag.Bool("chaos.long", false, "run the long suite (7,000 jobs and 4 faults per scenario, over 50,000 jobs in all)")
	only   = flag.String("chaos.run", "", "run only the scenario of this name")
	report = flag.String("chaos.report", "", "also write the results as a Markdown table to this file")
)

// TestChaos starts real processes (PostgreSQL, NATS servers, fairway
// coordinators and executors), injects each scenario's fault under load
// and checks that no acknowledged job is lost, none runs twice at once,
// each has exactly one final state, and every committed change has its
// event.
// suiteSetup makes the suite's directory (kept when the test fails, or when
// FAIRWAYCHAOS_KEEP is set: the processes' logs of a run that passed), builds
// the binaries and starts PostgreSQL.
func suiteSetup(t *testing.T, prefix string) (dir string, bin Binaries, pg *PG) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	// Under root PostgreSQL runs as postgres, which must reach its directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("FAIRWAYCHAOS_KEEP") == "" {
			if err := os.RemoveAll(dir); err != nil {
				t.Logf("removing %s: %v", dir, err)
			}
		}
	})
	bin, err = Build(t.Context(), filepath.Join(dir, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	pg, err = StartPG(t.Context(), filepath.Join(dir, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	return dir, bin, pg
}

// TestMain runs the fault suite when no other suite that measures delays
// runs (internal/heavytest): both measure the victims' side.
func TestMain(m *testing.M) {
	heavytest.Exclusive()
	os.Exit(m.Run())
}

func TestChaos(t *testing.T) {
	ctx := t.Context()
	dir, bin, pg := suiteSetup(t, "fairway-chaos-")

	size := Short
	if *long {
		size = Long
	}
	var results []Result
	for _, sc := range Scenarios() {
		if *only != "" && sc.Name != *only {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			// A scenario that hangs fails by its name, with its logs kept,
			// before go test's own timeout kills the whole suite.
			ctx, cancel := context.WithTimeout(ctx, size.Timeout)
			defer cancel()
			fmt.Fprintf(os.Stderr, "chaos: %s: starting at %s (at most %s)\n", sc.Name, time.Now().Format(time.TimeOnly), size.Timeout)
			res, notes, err := RunScenario(ctx, bin, pg, dir, sc, size)
			for _, n := range notes {
				t.Log(n)
			}
			t.Log(res)
			t.Log("slowest job:", res.SlowestJob)
			for _, j := range res.LostJobs {
				t.Log("lost job:", j)
			}
			for _, j := range res.RerunJobs {
				t.Log("rerun job:", j)
			}
			if res.NotLinearizableJob != "" {
				t.Log("reads not linearizable:", res.NotLinearizableJob)
			}
			fmt.Fprintln(os.Stderr, "chaos:", res)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, res)
		})
	}
	if *report != "" {
		if err := os.WriteFile(*report, []byte(Table(results)), 0o644); err != nil {
			t.Error(err)
		}
	}
}
