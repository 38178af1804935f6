package check

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

const composeFile = "../compose/compose.yaml"

// loadCompose loads a compose file as docker compose v2 does: schema
// validation, interpolation, merge keys, and consistency (depends_on
// targets, volumes and networks that exist).
func loadCompose(t *testing.T, file string, env ...string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{file}, cli.WithEnv(env), cli.WithConsistency(true))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return opts.LoadProject(ctx)
}

var composeEnv = []string{"WEB_ADMIN_TOKEN=admin-token-0123456789", "WEB_READ_TOKEN=read-token-0123456789"}

// TestComposeLoads: the file is valid for docker compose v2, and refuses
// to load without the dashboard's tokens.
func TestComposeLoads(t *testing.T) {
	if _, err := loadCompose(t, composeFile, composeEnv...); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	if _, err := loadCompose(t, composeFile); err == nil || !strings.Contains(err.Error(), "WEB_ADMIN_TOKEN") {
		t.Errorf("loads without WEB_ADMIN_TOKEN (err %v)", err)
	}
}

// TestComposeFailsOnBrokenFiles: the loader behind the checks refuses
// what docker compose refuses.
func TestComposeFailsOnBrokenFiles(t *testing.T) {
	good, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string][2]string{
		"misspelt key":         {"    healthcheck:\n      test: [\"CMD\", \"/healthcheck\", \"http://127.0.0.1:7879/healthz\"]", "    helthcheck:\n      test: [\"CMD\", \"/healthcheck\", \"http://127.0.0.1:7879/healthz\"]"},
		"unknown depends_on":   {"      migrate:\n        condition: service_completed_successfully", "      migrat:\n        condition: service_completed_successfully"},
		"bad condition":        {"condition: service_completed_successfully", "condition: service_done"},
		"undeclared volume":    {"      - nats-3-data:/data", "      - nats-4-data:/data"},
		"bad healthcheck time": {"interval: 5s", "interval: 5 seconds"},
	} {
		broken := strings.Replace(string(good), edit[0], edit[1], 1)
		if broken == string(good) {
			t.Fatalf("%s: %q is not in %s", name, edit[0], composeFile)
		}
		file := "../compose/broken-" + strings.ReplaceAll(name, " ", "-") + ".yaml"
		if err := os.WriteFile(file, []byte(broken), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loadCompose(t, file, composeEnv...)
		os.Remove(file)
		if err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

// TestComposeServices: every part is there, healthy before what needs it,
// locked down, and published on loopback only.
func TestComposeServices(t *testing.T) {
	p, err := loadCompose(t, composeFile, composeEnv...)
	if err != nil {
		t.Fatal(err)
	}
	fairway := map[string]string{ // service -> fairway command
		"migrate": "migrate", "coordinator-1": "coordinator", "coordinator-2": "coordinator",
		"executor-1": "executor", "executor-2": "executor", "web": "web",
	}
	nats := []string{"nats-1", "nats-2", "nats-3"}
	var want []string
	want = append(append(want, nats...), "postgres")
	for s := range fairway {
		want = append(want, s)
	}
	slices.Sort(want)
	if got := p.ServiceNames(); !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	for name, s := range p.Services {
		if name != "migrate" && (s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) < 2) {
			t.Errorf("%s: no healthcheck", name)
		}
		for dep, d := range s.DependsOn {
			switch d.Condition {
			case types.ServiceConditionHealthy:
				if hc := p.Services[dep].HealthCheck; hc == nil || hc.Disable {
					t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
				}
			case types.ServiceConditionCompletedSuccessfully:
				if dep != "migrate" {
					t.Errorf("%s waits for %s to complete", name, dep)
				}
			default:
				t.Errorf("%s depends on %s with condition %s: want service_healthy or service_completed_successfully", name, dep, d.Condition)
			}
		}
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %s:%s beyond loopback", name, port.HostIP, port.Published)
			}
		}
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeVolume && p.Volumes[v.Source].Name == "" {
				t.Errorf("%s: volume %s is not declared", name, v.Source)
			}
		}
	}

	needs := func(svc string, deps ...string) {
		t.Helper()
		for _, dep := range deps {
			if _, ok := p.Services[svc].DependsOn[dep]; !ok {
				t.Errorf("%s does not depend on %s", svc, dep)
			}
		}
	}
	needs("migrate", "postgres")
	for _, c := range []string{"coordinator-1", "coordinator-2"} {
		needs(c, append([]string{"postgres", "migrate"}, nats...)...)
	}
	for _, s := range []string{"executor-1", "executor-2", "web"} {
		needs(s, append([]string{"coordinator-1", "coordinator-2"}, nats...)...)
	}

	appIDs := map[string]bool{}
	for name, command := range fairway {
		s := p.Services[name]
		if s.Build == nil || s.Build.Context == "" || s.Build.Dockerfile != "Dockerfile" {
			t.Errorf("%s: not built from the repository's Dockerfile (build %+v)", name, s.Build)
		} else if _, err := os.Stat(s.Build.Context + "/" + s.Build.Dockerfile); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if len(s.Command) == 0 || s.Command[0] != command {
			t.Errorf("%s: command %v, want %s", name, s.Command, command)
		}
		if !s.ReadOnly || !slices.Equal(s.CapDrop, []string{"ALL"}) || !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: not read_only with cap_drop [ALL] and no-new-privileges", name)
		}
		env := func(k string) string {
			if v := s.Environment[k]; v != nil {
				return *v
			}
			return ""
		}
		if command != "migrate" && env("FAIRWAY_NATS_URL") != "nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222" {
			t.Errorf("%s: FAIRWAY_NATS_URL %q does not list the three NATS nodes", name, env("FAIRWAY_NATS_URL"))
		}
		switch command {
		case "migrate", "coordinator":
			if !strings.Contains(env("FAIRWAY_DATABASE_URL"), "@postgres:5432/") {
				t.Errorf("%s: FAIRWAY_DATABASE_URL %q is not the postgres service", name, env("FAIRWAY_DATABASE_URL"))
			}
		case "executor":
			id := env("FAIRWAY_EXECUTOR_APP_ID")
			if id == "" || appIDs[id] {
				t.Errorf("%s: app-id %q is empty or another executor's", name, id)
			}
			appIDs[id] = true
			drain, err := time.ParseDuration(env("FAIRWAY_EXECUTOR_DRAIN_TIMEOUT"))
			if err != nil || s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= drain {
				t.Errorf("%s: stop_grace_period %v is not longer than the drain timeout %q", name, s.StopGracePeriod, env("FAIRWAY_EXECUTOR_DRAIN_TIMEOUT"))
			}
		}
		if command == "coordinator" && env("FAIRWAY_NATS_REPLICAS") != "3" {
			t.Errorf("%s: FAIRWAY_NATS_REPLICAS %q, want 3 (one copy per NATS node)", name, env("FAIRWAY_NATS_REPLICAS"))
		}
	}

	// Three NATS nodes, each with its own name and data volume, and one
	// configuration whose routes name the three.
	conf, err := os.ReadFile("../compose/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	routes := regexp.MustCompile(`nats-route://([a-z0-9-]+):6222`).FindAllStringSubmatch(string(conf), -1)
	var routed []string
	for _, r := range routes {
		routed = append(routed, r[1])
	}
	if !slices.Equal(routed, nats) {
		t.Errorf("nats.conf routes to %v, want %v", routed, nats)
	}
	for _, n := range nats {
		s := p.Services[n]
		if v := s.Environment["SERVER_NAME"]; v == nil || *v != n {
			t.Errorf("%s: SERVER_NAME %v", n, v)
		}
		var data, confMounted bool
		for _, v := range s.Volumes {
			data = data || v.Type == types.VolumeTypeVolume && v.Source == n+"-data" && v.Target == "/data"
			confMounted = confMounted || strings.HasSuffix(v.Source, "/nats.conf") && v.Target == "/etc/nats/nats.conf"
		}
		if !data || !confMounted {
			t.Errorf("%s: wants volume %s-data on /data and nats.conf on /etc/nats/nats.conf (volumes %+v)", n, n, s.Volumes)
		}
	}
}
