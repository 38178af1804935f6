package fairway_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fairwayhq/fairway/internal/config"
	"github.com/nats-io/nats-server/v2/server"
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
		_ = f.Close() // only read
		for _, want := range required {
			if !has["[Service]"+want] {
				t.Errorf("%s: [Service] lacks %s", unit, want)
			}
		}
	}
}

// TestComposeNATSConfig: the NATS server itself reads the compose file's
// NATS configuration: a named node of a three-route cluster with
// JetStream and 8 MB payloads.
func TestComposeNATSConfig(t *testing.T) {
	t.Setenv("SERVER_NAME", "nats-2")
	opts, err := server.ProcessConfigFile("deploy/compose/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	if opts.ServerName != "nats-2" || !opts.JetStream || opts.StoreDir != "/data/jetstream" || opts.MaxPayload != 8*1024*1024 ||
		opts.Cluster.Name != "fairway" || opts.Cluster.Port != 6222 || opts.HTTPPort != 8222 {
		t.Errorf("server %q, JetStream %v in %q, max payload %d, cluster %q on %d, monitoring on %d",
			opts.ServerName, opts.JetStream, opts.StoreDir, opts.MaxPayload, opts.Cluster.Name, opts.Cluster.Port, opts.HTTPPort)
	}
	var routes []string
	for _, r := range opts.Routes {
		routes = append(routes, r.Host)
	}
	if want := []string{"nats-1:6222", "nats-2:6222", "nats-3:6222"}; !slices.Equal(routes, want) {
		t.Errorf("routes %v, want %v", routes, want)
	}
}

// deployEnv finds the FAIRWAY_* variables that deploy/compose,
// deploy/kubernetes and deploy/systemd set: every name, and the value
// where it is written out (name -> values; "" where it comes from
// elsewhere).
func deployEnv(t *testing.T) map[string][]string {
	files, _ := filepath.Glob("deploy/compose/*.yaml")
	more, _ := filepath.Glob("deploy/kubernetes/*.yaml")
	units, _ := filepath.Glob("deploy/systemd/*.service")
	files = append(append(files, more...), units...)
	if len(files) < 4 {
		t.Fatalf("deploy files %v", files)
	}
	env := map[string][]string{}
	name := regexp.MustCompile(`FAIRWAY_[A-Z0-9_]+`)
	composeValue := regexp.MustCompile(`(?m)^\s+(FAIRWAY_[A-Z0-9_]+):[ \t]*(.*?)[ \t]*$`)
	kubeValue := regexp.MustCompile(`(?m)^\s*- name: (FAIRWAY_[A-Z0-9_]+)\n\s+value: (.*?)\s*$`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(data), -1) {
			env[n] = append(env[n], "")
		}
		for _, m := range append(composeValue.FindAllStringSubmatch(string(data), -1), kubeValue.FindAllStringSubmatch(string(data), -1)...) {
			v := m[2]
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
			env[m[1]] = append(env[m[1]], v)
		}
	}
	return env
}

// TestDeployEnvironment: every FAIRWAY_* variable of the deploy files is a
// configuration key (an unknown one stops every command at start), and
// every value written out there is one the configuration accepts.
// fairway web's keys are checked once they exist.
func TestDeployEnvironment(t *testing.T) {
	known := map[string]bool{}
	web := false
	for _, k := range config.Keys() {
		known[k.Env] = true
		web = web || strings.HasPrefix(k.Name, "web.")
	}
	pending := []string{"FAIRWAY_WEB_ADDR", "FAIRWAY_WEB_ADMIN_TOKEN", "FAIRWAY_WEB_READ_TOKEN"}
	env := deployEnv(t)
	if len(env) < 10 {
		t.Fatalf("found only %v", env)
	}
	for name, values := range env {
		if !known[name] {
			if !web && slices.Contains(pending, name) {
				t.Logf("%s: fairway web's keys are not in this build yet", name)
				continue
			}
			t.Errorf("%s is not a configuration key", name)
			continue
		}
		for _, v := range values {
			// Files that exist only where deployed, and values that
			// compose or Kubernetes fill in.
			if v == "" || strings.ContainsAny(v, "$*") || strings.Contains(name, "_CREDS") || strings.Contains(name, "_NKEY") || strings.Contains(name, "_TLS_") {
				continue
			}
			if _, err := config.Load("", []string{name + "=" + v}, nil); err != nil {
				t.Errorf("%s=%s: %v", name, v, err)
			}
		}
	}
}

// TestComposeConfig runs 'docker compose config -q', where the compose
// plugin is installed (it needs no Docker engine). deploy/check loads the
// file with the same loader everywhere.
func TestComposeConfig(t *testing.T) {
	if err := exec.Command("docker", "compose", "version").Run(); err != nil {
		t.Skip("no docker compose plugin; deploy/check loads the file with compose-go instead")
	}
	cmd := exec.Command("docker", "compose", "-f", "deploy/compose/compose.yaml", "config", "-q")
	cmd.Env = append(os.Environ(), "WEB_ADMIN_TOKEN=admin-token-0123456789", "WEB_READ_TOKEN=read-token-0123456789")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker compose config: %v\n%s", err, out)
	}
}

// TestDeployDockerfile: a Go 1.26 builder makes a static binary of the
// command, which runs as a non-root user on a distroless image; the
// .dockerignore leaves the build what it needs.
func TestDeployDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(text, -1)
	if len(froms) != 2 || !strings.HasPrefix(froms[0][1], "golang:1.26") || !strings.HasPrefix(froms[1][1], "gcr.io/distroless/static") ||
		!strings.HasSuffix(froms[1][1], ":nonroot") {
		t.Errorf("stages %v: want golang:1.26, then gcr.io/distroless/static…:nonroot", froms)
	}
	for _, want := range []string{"CGO_ENABLED=0 go build", "./cmd/fairway", "./deploy/healthcheck", `ENTRYPOINT ["/fairway"]`} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %s", want)
		}
	}
	users := regexp.MustCompile(`(?m)^USER (\d+)(:\d+)?\s*$`).FindAllStringSubmatch(text, -1)
	if len(users) != 1 || users[0][1] == "0" {
		t.Errorf("USER lines %v: want one, a numeric non-root user (runAsNonRoot checks numbers)", users)
	}
	if lines := strings.Split(strings.TrimSpace(text), "\n"); !strings.HasPrefix(lines[len(lines)-1], "ENTRYPOINT") {
		t.Errorf("the last line is %q, not the ENTRYPOINT", lines[len(lines)-1])
	}
	ignore, err := os.ReadFile(".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Split(string(ignore), "\n") {
		p = strings.TrimSpace(p)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		for _, needed := range []string{"go.mod", "go.sum", "cmd", "cmd/fairway/main.go", "internal", "store", "deploy/healthcheck", "deploy/healthcheck/main.go", "Dockerfile"} {
			if ok, _ := filepath.Match(strings.TrimPrefix(p, "/"), needed); ok {
				t.Errorf(".dockerignore's %q leaves out %s, which the build needs", p, needed)
			}
		}
	}
	for _, secret := range []string{".fairway", ".git", "**/*.creds"} {
		if !strings.Contains(string(ignore), secret+"\n") {
			t.Errorf(".dockerignore does not leave out %s", secret)
		}
	}
}
