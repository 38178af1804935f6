package check

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// strict decodes YAML as the API server decodes JSON: field names are
// case-sensitive, and an unknown field or one given twice is an error
// (encoding/json, behind yaml.UnmarshalStrict, matches names whatever
// their case).
func strict(doc []byte, v any) error {
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(data, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

const kubeDir = "../kubernetes"

// manifests is what the manifests of deploy/kubernetes hold, decoded.
type manifests struct {
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	pdbs         []*policyv1.PodDisruptionBudget
	namespaces   []*corev1.Namespace
	clusters     []map[string]any // CloudNativePG Clusters
	files        []string         // files with Kubernetes objects
}

// documents splits a YAML stream on its "---" lines.
func documents(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// decodeManifests decodes every object of the given files strictly: a
// field the API type does not have (in any case), or one given twice, is
// an error.
func decodeManifests(files ...string) (*manifests, error) {
	m := &manifests{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		for i, doc := range documents(data) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				return nil, fmt.Errorf("%s, document %d: %w", file, i+1, err)
			}
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				d := &appsv1.Deployment{}
				m.deployments, obj = append(m.deployments, d), d
			case "apps/v1 StatefulSet":
				s := &appsv1.StatefulSet{}
				m.statefulSets, obj = append(m.statefulSets, s), s
			case "v1 Service":
				s := &corev1.Service{}
				m.services, obj = append(m.services, s), s
			case "policy/v1 PodDisruptionBudget":
				p := &policyv1.PodDisruptionBudget{}
				m.pdbs, obj = append(m.pdbs, p), p
			case "v1 Namespace":
				n := &corev1.Namespace{}
				m.namespaces, obj = append(m.namespaces, n), n
			case "postgresql.cnpg.io/v1 Cluster":
				c := map[string]any{}
				if err := strict(doc, &c); err != nil {
					return nil, fmt.Errorf("%s, document %d: %w", file, i+1, err)
				}
				if err := checkCNPGCluster(c); err != nil {
					return nil, fmt.Errorf("%s, document %d (Cluster): %w", file, i+1, err)
				}
				m.clusters = append(m.clusters, c)
				continue
			default:
				return nil, fmt.Errorf("%s, document %d: unexpected %q %q", file, i+1, tm.APIVersion, tm.Kind)
			}
			if err := strict(doc, obj); err != nil {
				return nil, fmt.Errorf("%s, document %d (%s): %w", file, i+1, tm.Kind, err)
			}
		}
		m.files = append(m.files, filepath.Base(file))
	}
	return m, nil
}

// kubeFiles are the manifests: every YAML file but the Helm values and
// the kustomization.
func kubeFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", kubeDir, err)
	}
	return slices.DeleteFunc(files, func(f string) bool {
		return strings.HasSuffix(f, "nats-values.yaml") || strings.HasSuffix(f, "kustomization.yaml")
	})
}

// TestKubeManifestsDecodeStrictly: every object is a known kind that
// decodes into its API type without an unknown field, and the
// kustomization lists every manifest.
func TestKubeManifestsDecodeStrictly(t *testing.T) {
	m, err := decodeManifests(kubeFiles(t)...)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.deployments) != 2 || len(m.statefulSets) != 1 || len(m.clusters) != 1 || len(m.pdbs) != 3 || len(m.namespaces) != 1 {
		t.Errorf("%d Deployments, %d StatefulSets, %d Clusters, %d PDBs, %d Namespaces: want 2, 1, 1, 3, 1",
			len(m.deployments), len(m.statefulSets), len(m.clusters), len(m.pdbs), len(m.namespaces))
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Images     []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	data, err := os.ReadFile(filepath.Join(kubeDir, "kustomization.yaml"))
	if err == nil {
		err = strict(data, &k)
	}
	if err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.Kind != "Kustomization" || !slices.Equal(slices.Sorted(slices.Values(k.Resources)), slices.Sorted(slices.Values(m.files))) {
		t.Errorf("kustomization.yaml: kind %q, resources %v; want Kustomization and %v", k.Kind, k.Resources, m.files)
	}
	if len(k.Images) != 1 || k.Images[0].Name != "fairway" {
		t.Errorf("kustomization.yaml: images %+v; want one, fairway", k.Images)
	}
}

// TestKubeManifestsFailOnTypos: the strict decoding refuses a misspelt
// field, a field at the wrong level, a wrong type and a bad Cluster.
func TestKubeManifestsFailOnTypos(t *testing.T) {
	for _, c := range []struct{ file, from, to string }{
		{"coordinator.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true"},
		{"coordinator.yaml", "          readinessProbe:", "          readynessProbe:"},
		{"executor.yaml", "terminationGracePeriodSeconds: 150", "terminationGracePeriodSeconds: 150s"},
		{"executor.yaml", "  serviceName: fairway-executor", "  servicename: fairway-executor"},
		{"web.yaml", "  minAvailable: 1", "  minAvailable: 1\n  minavailable: 1"},
		{"web.yaml", "      targetPort: http", "      targetPort: http\n      protocl: TCP"},
		{"postgres.yaml", "  instances: 3", "  instance: 3"},
		{"postgres.yaml", "    size: 20Gi", "    size: 20 gigs"},
		{"postgres.yaml", "      method: any", "      method: all"},
	} {
		data, err := os.ReadFile(filepath.Join(kubeDir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		broken := strings.Replace(string(data), c.from, c.to, 1)
		if broken == string(data) {
			t.Fatalf("%q is not in %s", c.from, c.file)
		}
		file := filepath.Join(t.TempDir(), c.file)
		if err := os.WriteFile(file, []byte(broken), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := decodeManifests(file); err == nil {
			t.Errorf("%s with %q decoded", c.file, c.to)
		} else {
			t.Logf("%s with %q: %v", c.file, c.to, err)
		}
	}
}

// TestKubeWorkloads: probes, security contexts, resources, Secrets and
// volumes of every Fairway pod; selectors of Services and budgets.
func TestKubeWorkloads(t *testing.T) {
	m, err := decodeManifests(kubeFiles(t)...)
	if err != nil {
		t.Fatal(err)
	}
	type workload struct {
		name     string
		replicas *int32
		selector *metav1.LabelSelector
		pod      corev1.PodTemplateSpec
	}
	var workloads []workload
	for _, d := range m.deployments {
		workloads = append(workloads, workload{"Deployment " + d.Name, d.Spec.Replicas, d.Spec.Selector, d.Spec.Template})
	}
	for _, s := range m.statefulSets {
		workloads = append(workloads, workload{"StatefulSet " + s.Name, s.Spec.Replicas, s.Spec.Selector, s.Spec.Template})
		if !slices.ContainsFunc(m.services, func(svc *corev1.Service) bool { return svc.Name == s.Spec.ServiceName }) {
			t.Errorf("StatefulSet %s: its Service %q is missing", s.Name, s.Spec.ServiceName)
		}
	}
	cluster := m.clusters[0]["metadata"].(map[string]any)["name"].(string)
	// Secrets the manifests may use: those CloudNativePG makes, and those
	// deploy/README.md tells to create.
	secrets := map[string][]string{
		cluster + "-app": {"uri"}, cluster + "-ca": {"ca.crt"},
		"fairway-nats-coordinator": nil, "fairway-nats-executors": nil, "fairway-nats-operator": nil,
		"fairway-web": {"admin-token", "read-token"},
	}
	commands := map[string]int32{}
	for _, w := range workloads {
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(w.pod.Labels)) {
			t.Errorf("%s: selector %v does not select its pods (%v, %v)", w.name, w.selector, w.pod.Labels, err)
		}
		if w.pod.Namespace != "" {
			t.Errorf("%s: pod template has a namespace", w.name)
		}
		spec := w.pod.Spec
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
			psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod securityContext %+v: want runAsNonRoot, a non-zero runAsUser and the RuntimeDefault seccomp profile", w.name, psc)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: mounts a service account token", w.name)
		}
		// Service links would set FAIRWAY_WEB_PORT, FAIRWAY_COORDINATOR_SERVICE_HOST
		// and the like for the Services named fairway-*, and fairway
		// refuses unknown FAIRWAY_* variables: every command would stop.
		if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
			t.Errorf("%s: enableServiceLinks is not false: the fairway-* Services' variables (FAIRWAY_WEB_PORT, …) would stop fairway at start", w.name)
		}
		volumes := map[string]corev1.Volume{}
		for _, v := range spec.Volumes {
			volumes[v.Name] = v
			if v.Secret != nil {
				keys, ok := secrets[v.Secret.SecretName]
				if !ok {
					t.Errorf("%s: volume %s: unknown Secret %s", w.name, v.Name, v.Secret.SecretName)
				}
				for _, item := range v.Secret.Items {
					if !slices.Contains(keys, item.Key) {
						t.Errorf("%s: volume %s: Secret %s has no key %s", w.name, v.Name, v.Secret.SecretName, item.Key)
					}
				}
			}
		}
		if len(spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", w.name, len(spec.Containers))
		}
		c := spec.Containers[0]
		if c.Image != "fairway" || len(c.Command) != 0 || len(c.Args) != 1 {
			t.Errorf("%s: image %q command %v args %v: want the image fairway (kustomize names it) and one argument, the command", w.name, c.Image, c.Command, c.Args)
		}
		if len(c.Args) > 0 {
			commands[c.Args[0]] = *w.replicas
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s: container securityContext %+v: want readOnlyRootFilesystem, no privilege escalation, capabilities drop [ALL]", w.name, sc)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
			if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
				t.Errorf("%s: %s request %s, limit %s: want both, request at most limit", w.name, r, req.String(), lim.String())
			}
		}
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		for kind, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || ports[p.HTTPGet.Port.StrVal] == 0 {
				t.Errorf("%s: %s probe %+v: want GET /healthz on a named container port", w.name, kind, p)
			}
		}
		env := map[string]string{}
		for _, e := range c.Env {
			if _, dup := env[e.Name]; dup {
				t.Errorf("%s: %s set twice", w.name, e.Name)
			}
			// $(VAR) expands only variables defined above it.
			for _, ref := range regexp.MustCompile(`\$\(([A-Za-z0-9_]+)\)`).FindAllStringSubmatch(e.Value, -1) {
				if _, ok := env[ref[1]]; !ok {
					t.Errorf("%s: %s refers to $(%s), not defined before it", w.name, e.Name, ref[1])
				}
			}
			env[e.Name] = e.Value
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				ref := e.ValueFrom.SecretKeyRef
				if keys, ok := secrets[ref.Name]; !ok || !slices.Contains(keys, ref.Key) {
					t.Errorf("%s: %s from Secret %s key %s, which is not one the manifests provide for", w.name, e.Name, ref.Name, ref.Key)
				}
			}
		}
		// Files named in the configuration lie in a mounted volume.
		mounted := func(path string) bool {
			for _, vm := range c.VolumeMounts {
				if _, ok := volumes[vm.Name]; ok && strings.HasPrefix(path, vm.MountPath+"/") {
					return true
				}
			}
			return false
		}
		for _, vm := range c.VolumeMounts {
			if _, ok := volumes[vm.Name]; !ok {
				t.Errorf("%s: mounts %s, which is not a volume", w.name, vm.Name)
			}
		}
		for _, k := range []string{"FAIRWAY_NATS_CREDS", "FAIRWAY_EXECUTOR_HTTP_TOKEN_FILE"} {
			if v, ok := env[k]; ok && !mounted(v) {
				t.Errorf("%s: %s %s is in no mounted volume", w.name, k, v)
			}
		}
		if db, ok := env["FAIRWAY_DATABASE_URL"]; ok {
			root := regexp.MustCompile(`sslrootcert=([^&]+)`).FindStringSubmatch(db)
			if !strings.Contains(db, "sslmode=verify-full") || root == nil || !mounted(root[1]) {
				t.Errorf("%s: FAIRWAY_DATABASE_URL %q: want sslmode=verify-full with a mounted sslrootcert", w.name, db)
			}
		}
		if env["FAIRWAY_NATS_URL"] != "nats://nats:4222" || env["FAIRWAY_NATS_CREDS"] == "" {
			t.Errorf("%s: NATS %q with credential %q: want the chart's Service nats:4222 and a credential", w.name, env["FAIRWAY_NATS_URL"], env["FAIRWAY_NATS_CREDS"])
		}
		if drain, ok := env["FAIRWAY_EXECUTOR_DRAIN_TIMEOUT"]; ok {
			d, err := time.ParseDuration(drain)
			grace := spec.TerminationGracePeriodSeconds
			if err != nil || grace == nil || time.Duration(*grace)*time.Second < d+10*time.Second {
				t.Errorf("%s: terminationGracePeriodSeconds %s does not leave the drain (%s) 10 s to spare", w.name, seconds(grace), drain)
			}
		}
	}
	if commands["coordinator"] != 2 || commands["executor"] < 1 || commands["web"] < 1 {
		t.Errorf("replicas by command %v: want 2 coordinators, executors and web", commands)
	}

	selects := func(sel *metav1.LabelSelector) []workload {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || s.Empty() {
			return nil
		}
		var out []workload
		for _, w := range workloads {
			if s.Matches(labels.Set(w.pod.Labels)) {
				out = append(out, w)
			}
		}
		return out
	}
	covered := map[string]bool{}
	for _, p := range m.pdbs {
		ws := selects(p.Spec.Selector)
		if len(ws) != 1 || (p.Spec.MinAvailable == nil) == (p.Spec.MaxUnavailable == nil) {
			t.Errorf("PodDisruptionBudget %s: selects %d workloads, want 1, with minAvailable or maxUnavailable", p.Name, len(ws))
			continue
		}
		covered[ws[0].name] = true
		if p.Spec.MinAvailable != nil && p.Spec.MinAvailable.IntValue() >= int(*ws[0].replicas) {
			t.Errorf("PodDisruptionBudget %s: minAvailable %s of %d replicas blocks every eviction", p.Name, p.Spec.MinAvailable.String(), *ws[0].replicas)
		}
	}
	for _, w := range workloads {
		if !covered[w.name] {
			t.Errorf("%s has no PodDisruptionBudget", w.name)
		}
	}
	for _, s := range m.services {
		ws := selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector})
		if len(ws) != 1 {
			t.Errorf("Service %s selects %d workloads, want 1", s.Name, len(ws))
			continue
		}
		for _, p := range s.Spec.Ports {
			if !slices.ContainsFunc(ws[0].pod.Spec.Containers[0].Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.TargetPort.StrVal }) {
				t.Errorf("Service %s: targetPort %s is no named port of %s", s.Name, p.TargetPort.String(), ws[0].name)
			}
		}
	}
	for _, obj := range append(append([]metav1.Object{}, objs(m.deployments)...), append(objs(m.statefulSets), append(objs(m.services), objs(m.pdbs)...)...)...) {
		if obj.GetNamespace() != m.namespaces[0].Name {
			t.Errorf("%s is in namespace %q, not %q", obj.GetName(), obj.GetNamespace(), m.namespaces[0].Name)
		}
	}
}

func objs[T metav1.Object](in []T) []metav1.Object {
	out := make([]metav1.Object, len(in))
	for i, o := range in {
		out[i] = o
	}
	return out
}

// cnpgSpecFields are the fields of a CloudNativePG Cluster's spec
// (postgresql.cnpg.io/v1, its CRD as of release 1.27/1.28); the Go module
// with its types is not on the module proxy.
var cnpgSpecFields = []string{"affinity", "backup", "bootstrap", "certificates", "description", "enablePDB", "enableSuperuserAccess",
	"env", "envFrom", "ephemeralVolumeSource", "ephemeralVolumesSizeLimit", "externalClusters", "failoverDelay", "imageCatalogRef",
	"imageName", "imagePullPolicy", "imagePullSecrets", "inheritedMetadata", "instances", "livenessProbeTimeout", "logLevel", "managed",
	"maxSyncReplicas", "minSyncReplicas", "monitoring", "nodeMaintenanceWindow", "plugins", "podSecurityContext", "podSelectorRefs",
	"postgresGID", "postgresUID", "postgresql", "primaryLease", "primaryUpdateMethod", "primaryUpdateStrategy", "priorityClassName", "probes",
	"projectedVolumeTemplate", "replica", "replicationSlots", "resources", "schedulerName", "seccompProfile", "securityContext",
	"serviceAccountName", "serviceAccountTemplate", "smartShutdownTimeout", "startDelay", "stopDelay", "storage", "superuserSecret",
	"switchoverDelay", "tablespaces", "topologySpreadConstraints", "walStorage"}

// cnpgFields are those of the spec's parts that the manifest uses.
var cnpgFields = map[string][]string{
	"storage":                {"pvcTemplate", "resizeInUseVolumes", "size", "storageClass"},
	"bootstrap":              {"initdb", "pg_basebackup", "recovery"},
	"bootstrap.initdb":       {"builtinLocale", "dataChecksums", "database", "encoding", "icuLocale", "icuRules", "import", "locale", "localeCType", "localeCollate", "localeProvider", "options", "owner", "postInitApplicationSQL", "postInitApplicationSQLRefs", "postInitSQL", "postInitSQLRefs", "postInitTemplateSQL", "postInitTemplateSQLRefs", "secret", "walSegmentSize"},
	"postgresql":             {"enableAlterSystem", "extensions", "ldap", "parameters", "pg_hba", "pg_ident", "promotionTimeout", "shared_preload_libraries", "syncReplicaElectionConstraint", "synchronous"},
	"postgresql.synchronous": {"dataDurability", "failoverQuorum", "maxStandbyNamesFromCluster", "method", "nodeFailureDomainKeys", "number", "podFailureDomainKeys", "standbyNamesPost", "standbyNamesPre"},
	"affinity":               {"additionalPodAffinity", "additionalPodAntiAffinity", "enablePodAntiAffinity", "nodeAffinity", "nodeSelector", "podAntiAffinityType", "tolerations", "topologyKey"},
	"resources":              {"claims", "limits", "requests"},
}

// number is an integer or a float of a decoded document as a float.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// checkCNPGCluster checks a Cluster's fields against CloudNativePG's CRD
// and what Fairway needs: three instances, a synchronous standby, storage,
// the fairway database.
func checkCNPGCluster(c map[string]any) error {
	for k := range c {
		if !slices.Contains([]string{"apiVersion", "kind", "metadata", "spec"}, k) {
			return fmt.Errorf("unknown field %q", k)
		}
	}
	meta, _ := c["metadata"].(map[string]any)
	if name, _ := meta["name"].(string); name == "" {
		return fmt.Errorf("metadata.name is missing")
	}
	spec, ok := c["spec"].(map[string]any)
	if !ok {
		return fmt.Errorf("spec is missing")
	}
	var check func(path string, m map[string]any, allowed []string) error
	check = func(path string, m map[string]any, allowed []string) error {
		for k, v := range m {
			if !slices.Contains(allowed, k) {
				return fmt.Errorf("unknown field spec.%s%s", strings.TrimPrefix(path+".", "."), k)
			}
			sub := strings.TrimPrefix(path+"."+k, ".")
			if fields, ok := cnpgFields[sub]; ok {
				vm, ok := v.(map[string]any)
				if !ok {
					return fmt.Errorf("spec.%s is not an object", sub)
				}
				if err := check(sub, vm, fields); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := check("", spec, cnpgSpecFields); err != nil {
		return err
	}
	if n, ok := number(spec["instances"]); !ok || n != 3 {
		return fmt.Errorf("spec.instances %v, want 3", spec["instances"])
	}
	storage, _ := spec["storage"].(map[string]any)
	size, _ := storage["size"].(string)
	if _, err := resource.ParseQuantity(size); err != nil {
		return fmt.Errorf("spec.storage.size %q: %w", size, err)
	}
	pg, _ := spec["postgresql"].(map[string]any)
	sync, _ := pg["synchronous"].(map[string]any)
	if m, _ := sync["method"].(string); m != "any" && m != "first" {
		return fmt.Errorf("spec.postgresql.synchronous.method %q: want any or first", sync["method"])
	}
	if n, _ := number(sync["number"]); n < 1 || n >= 3 {
		return fmt.Errorf("spec.postgresql.synchronous.number %v: want 1 or 2", sync["number"])
	}
	for k, v := range pg["parameters"].(map[string]any) {
		if _, ok := v.(string); !ok {
			return fmt.Errorf("spec.postgresql.parameters.%s is not a string", k)
		}
	}
	boot, _ := spec["bootstrap"].(map[string]any)
	initdb, _ := boot["initdb"].(map[string]any)
	if initdb["database"] != "fairway" || initdb["owner"] != "fairway" {
		return fmt.Errorf("spec.bootstrap.initdb: database %v owner %v, want fairway and fairway", initdb["database"], initdb["owner"])
	}
	return nil
}

// natsChartValues are the value paths of the NATS Helm chart (2.14.2)
// that the values file may set; below "merge", "patch" and "env" any
// key goes (they are copied into the server's configuration, the objects
// or the environment).
var natsChartValues = []string{
	"config.cluster.enabled", "config.cluster.replicas", "config.cluster.port", "config.cluster.noAdvertise",
	"config.jetstream.enabled", "config.jetstream.fileStore.enabled", "config.jetstream.fileStore.dir",
	"config.jetstream.fileStore.pvc.enabled", "config.jetstream.fileStore.pvc.size", "config.jetstream.fileStore.pvc.storageClassName",
	"config.jetstream.fileStore.maxSize", "config.jetstream.memoryStore.enabled", "config.jetstream.memoryStore.maxSize",
	"config.nats.port", "config.nats.tls.enabled", "config.nats.tls.secretName", "config.monitor.enabled", "config.monitor.port",
	"config.resolver.enabled", "config.merge", "container.env", "container.merge", "container.image.tag",
	"podTemplate.topologySpreadConstraints", "podTemplate.merge", "podDisruptionBudget.enabled", "natsBox.enabled",
	"reloader.enabled", "promExporter.enabled", "promExporter.podMonitor.enabled", "service.enabled", "configMap.merge",
}

// checkNATSValues checks the Helm values: known paths only, and a
// three-node JetStream cluster on persistent volumes with an 8 MB payload.
func checkNATSValues(data []byte) error {
	var v map[string]any
	if err := strict(data, &v); err != nil {
		return err
	}
	var walk func(prefix string, m map[string]any) error
	walk = func(prefix string, m map[string]any) error {
		for k, val := range m {
			path := strings.TrimPrefix(prefix+"."+k, ".")
			if slices.Contains(natsChartValues, path) {
				continue
			}
			sub, ok := val.(map[string]any)
			if !ok || !slices.ContainsFunc(natsChartValues, func(p string) bool { return strings.HasPrefix(p, path+".") }) {
				return fmt.Errorf("%s is not a value of the NATS chart", path)
			}
			if err := walk(path, sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk("", v); err != nil {
		return err
	}
	get := func(path string) any {
		var cur any = v
		for _, p := range strings.Split(path, ".") {
			m, _ := cur.(map[string]any)
			cur = m[p]
		}
		return cur
	}
	for path, want := range map[string]any{
		"config.cluster.enabled": true, "config.cluster.replicas": int64(3), "config.jetstream.enabled": true,
		"config.jetstream.fileStore.enabled": true, "config.jetstream.fileStore.pvc.enabled": true,
		"config.merge.max_payload": "<< 8MB >>", "podDisruptionBudget.enabled": true,
	} {
		if got := get(path); got != want {
			return fmt.Errorf("%s is %v, want %v", path, got, want)
		}
	}
	size, _ := get("config.jetstream.fileStore.pvc.size").(string)
	if _, err := resource.ParseQuantity(size); err != nil {
		return fmt.Errorf("config.jetstream.fileStore.pvc.size %q: %w", size, err)
	}
	return nil
}

// TestKubeNATSValues: the Helm values hold a three-node JetStream cluster
// on file storage, and a misplaced or misspelt value fails.
func TestKubeNATSValues(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(kubeDir, "nats-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkNATSValues(data); err != nil {
		t.Fatalf("nats-values.yaml: %v", err)
	}
	for _, edit := range [][2]string{
		{"    replicas: 3", "    replica: 3"},
		{"  jetstream:\n    enabled: true", "  jetStream:\n    enabled: true"},
		{"        size: 20Gi", "        size: twenty"},
		{"natsBox:", "natsbox:"},
		{"    max_payload: << 8MB >>", "    max_payload: << 1MB >>"},
	} {
		broken := bytes.Replace(data, []byte(edit[0]), []byte(edit[1]), 1)
		if bytes.Equal(broken, data) {
			t.Fatalf("%q is not in nats-values.yaml", edit[0])
		}
		if err := checkNATSValues(broken); err == nil {
			t.Errorf("nats-values.yaml with %q passed", edit[1])
		}
	}
}

// seconds shows an optional number of seconds.
func seconds(s *int64) string {
	if s == nil {
		return "(unset)"
	}
	return fmt.Sprintf("%ds", *s)
}
