package flux

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// chartKeysFile records the values keys of the argo-helm chart the page's
// Helm values are for, and chartPodLabelsFile its controller pods' labels.
const (
	chartKeysFile      = "testdata/argo-helm-argo-rollouts-2.41.0.keys"
	chartPodLabelsFile = "testdata/argo-helm-argo-rollouts-2.41.0.pod-labels"
)

// routeClusterMark ends the lines of the Helm values a controller without
// route clusters leaves out.
const routeClusterMark = "# route cluster"

// The Helm values of docs/install.md (its ```helm-values block), as a
// platform team gives them to the argo-helm chart argo-rollouts 2.41.0:
//   - every key is one of the chart's (recorded from its values.yaml);
//   - with the lines marked "# route cluster" left out, the controller
//     loads the plugin as install/argo-rollouts makes it, and with them, as
//     install/argo-rollouts-route-cluster beside it does: the same entry
//     (the values add -metrics-address), the same init container, volumes
//     and mounts, where the chart's Deployment is Argo Rollouts v1.10.1's own
//     with the values added as the chart's templates/controller/deployment.yaml
//     adds them;
//   - the metrics Service of extraObjects selects the chart's controller
//     pods and targets the port of -metrics-address.
func TestHelmValues(t *testing.T) {
	keys := chartKeys(t)
	block := helmValuesBlock(t, installPage)
	initContainer := docOverlay(t, "install/argo-rollouts")
	withRouteCluster := copyOverlay(t, initContainer)
	withRouteCluster["components"] = append(withRouteCluster["components"].([]any),
		"https://github.com/gatewayapi-ssa/rollouts-plugin//install/argo-rollouts-route-cluster?ref=v0.1.0")
	for _, c := range []struct {
		name    string
		values  string
		overlay map[string]any
	}{
		{"without route clusters", withoutRouteClusters(block), initContainer},
		{"with a route cluster", block, withRouteCluster},
	} {
		t.Run(c.name, func(t *testing.T) {
			values := parseValues(t, c.values)
			for _, k := range unknownKeys(values, keys) {
				t.Error(k)
			}
			_, byName := kustomizeBuild(t, installPage, c.overlay)
			kustomized, err := installOf(byName)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range helmMismatches(t, values, kustomized) {
				t.Error(p)
			}
		})
	}
}

// The checks of TestHelmValues refuse what they are for: the page's values,
// broken one way at a time, are refused, each with a problem that says so.
func TestHelmValuesChecksRefuseBrokenValues(t *testing.T) {
	keys := chartKeys(t)
	block := withoutRouteClusters(helmValuesBlock(t, installPage))
	_, byName := kustomizeBuild(t, installPage, docOverlay(t, "install/argo-rollouts"))
	kustomized, err := installOf(byName)
	if err != nil {
		t.Fatal(err)
	}
	if k := unknownKeys(parseValues(t, block), keys); len(k) > 0 {
		t.Fatalf("unbroken, the values have keys the chart has not: %v", k)
	}
	if p := helmMismatches(t, parseValues(t, block), kustomized); len(p) > 0 {
		t.Fatalf("unbroken, the values are refused already: %q", p)
	}
	for _, c := range []struct {
		name, old, new, want string
	}{
		{"initContainer for initContainers", "  initContainers:", "  initContainer:", "controller.initContainer is not a value of"},
		{"volumeMounts at the top", "\n  volumeMounts:\n", "\nvolumeMounts:\n", "volumeMounts is not a value of"},
		{"a misspelt plugins key", "  trafficRouterPlugins:", "  trafficRouterPlugin:", "controller.trafficRouterPlugin is not a value of"},
		{"another location", "location: \"file:///home/argo-rollouts/plugins/rollouts-gatewayapi-ssa\"", "location: \"file:///home/argo-rollouts/plugins/gatewayapi\"", "no init container copies"},
		{"another copy destination", "\"/plugins/rollouts-gatewayapi-ssa\"]", "\"/plugins/gatewayapi\"]", "the init container differs"},
		{"another mount of the controller", "mountPath: /home/argo-rollouts/plugins\n", "mountPath: /home/argo-rollouts/plugin\n", "nothing is mounted"},
		{"a writable mount", "    mountPath: /home/argo-rollouts/plugins\n    readOnly: true\n", "    mountPath: /home/argo-rollouts/plugins\n", "the controller's mounts differ"},
		{"another arg", "\"-field-manager=argo-rollouts-gatewayapi\"", "\"-field-manager=helm\"", "the entry differs"},
		{"another metrics port", "targetPort: 8091", "targetPort: 8090", "does not target"},
		{"a selector of no pod", "app.kubernetes.io/component: rollouts-controller", "app.kubernetes.io/component: controller", "selects no controller pod"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Count(block, c.old) != 1 {
				t.Fatalf("the values have %q %d times, want once", c.old, strings.Count(block, c.old))
			}
			values := parseValues(t, strings.Replace(block, c.old, c.new, 1))
			got := append(unknownKeys(values, keys), helmMismatches(t, values, kustomized)...)
			for _, p := range got {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Errorf("broken, the values are not refused with %q; the problems: %q", c.want, got)
		})
	}
}

// helmValues is what the page's values set of the chart's.
type helmValues struct {
	Controller struct {
		TrafficRouterPlugins []any                `json:"trafficRouterPlugins"`
		InitContainers       []corev1.Container   `json:"initContainers"`
		Volumes              []corev1.Volume      `json:"volumes"`
		VolumeMounts         []corev1.VolumeMount `json:"volumeMounts"`
	} `json:"controller"`
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext"`
	ExtraObjects             []map[string]any        `json:"extraObjects"`
}

// helmMismatches lists where values would not load the plugin, or load it
// otherwise than the kustomize build kustomized does.
func helmMismatches(t *testing.T, values map[string]any, kustomized install) []string {
	t.Helper()
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	var v helmValues
	if err := yaml.Unmarshal(data, &v); err != nil {
		return []string{fmt.Sprintf("the values do not decode as containers, volumes and mounts: %v", err)}
	}
	argo := argoRolloutsInstall(t)
	helm := chartInstall(t, v, argo)
	problems := append(loadProblems(helm), routeClusterProblems(helm)...)

	// What install/ adds to Argo Rollouts' own Deployment and entry, the values add.
	added := func(in install) ([]corev1.Volume, []corev1.VolumeMount) {
		var vols []corev1.Volume
		for _, vol := range in.deployment.Spec.Template.Spec.Volumes {
			if volumeOf(argo.deployment.Spec.Template.Spec, vol.Name) == nil {
				vols = append(vols, vol)
			}
		}
		var mounts []corev1.VolumeMount
		for _, m := range in.controller().VolumeMounts {
			if !slices.Contains(argo.controller().VolumeMounts, m) {
				mounts = append(mounts, m)
			}
		}
		return vols, mounts
	}
	kVols, kMounts := added(kustomized)
	hVols, hMounts := added(helm)
	// In any order: kustomize's merge puts them where it will.
	byName := cmpopts.SortSlices(func(a, b corev1.Volume) bool { return a.Name < b.Name })
	byPath := cmpopts.SortSlices(func(a, b corev1.VolumeMount) bool { return a.MountPath < b.MountPath })
	if diff := cmp.Diff(kVols, hVols, byName); diff != "" {
		problems = append(problems, fmt.Sprintf("the volumes differ from install/'s (-kustomize +helm):\n%s", diff))
	}
	if diff := cmp.Diff(kMounts, hMounts, byPath); diff != "" {
		problems = append(problems, fmt.Sprintf("the controller's mounts differ from install/'s (-kustomize +helm):\n%s", diff))
	}
	if diff := cmp.Diff(kustomized.deployment.Spec.Template.Spec.InitContainers, helm.deployment.Spec.Template.Spec.InitContainers); diff != "" {
		problems = append(problems, fmt.Sprintf("the init container differs from install/argo-rollouts's, with the kustomization's image (-kustomize +helm):\n%s", diff))
	}
	kEntry, kErr := kustomized.entry()
	hEntry, hErr := helm.entry()
	if kErr != nil || hErr != nil {
		return append(problems, fmt.Sprintf("the entries: %v, %v", kErr, hErr))
	}
	var metricsAddr string
	hEntry.Args = slices.DeleteFunc(hEntry.Args, func(a string) bool {
		addr, ok := strings.CutPrefix(a, "-metrics-address=")
		if ok {
			metricsAddr = addr
		}
		return ok
	})
	if diff := cmp.Diff(kEntry, hEntry); diff != "" {
		problems = append(problems, fmt.Sprintf("the entry differs from install/'s but for -metrics-address (-kustomize +helm):\n%s", diff))
	}
	return append(problems, metricsServiceProblems(t, v.ExtraObjects, metricsAddr)...)
}

// metricsServiceProblems lists what keeps the Service of extraObjects from
// reaching the plugin's metrics at addr (-metrics-address) in the chart's
// controller pods.
func metricsServiceProblems(t *testing.T, objects []map[string]any, addr string) []string {
	t.Helper()
	if addr == "" {
		return []string{"the entry has no -metrics-address"}
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []string{fmt.Sprintf("-metrics-address=%s: %v", addr, err)}
	}
	if len(objects) != 1 {
		return []string{fmt.Sprintf("extraObjects has %d objects, want the metrics Service", len(objects))}
	}
	data, err := yaml.Marshal(objects[0])
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := yaml.UnmarshalStrict(data, &svc); err != nil || svc.Kind != "Service" {
		return []string{fmt.Sprintf("extraObjects[0] is not a Service: %v", err)}
	}
	var problems []string
	labels := chartPodLabels(t)
	for k, v := range svc.Spec.Selector {
		if labels[k] != v {
			problems = append(problems, fmt.Sprintf("the metrics Service selects no controller pod: %s=%s is not one of the chart's pod labels %v", k, v, labels))
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != intstr.Parse(port) {
		problems = append(problems, fmt.Sprintf("the metrics Service does not target port %s of -metrics-address: %+v", port, svc.Spec.Ports))
	}
	return problems
}

// argoRolloutsInstall is Argo Rollouts v1.10.1's own Deployment and
// ConfigMap, as its manifests/base has them: what the chart's templates
// render with the default values but for labels, probes and args.
func argoRolloutsInstall(t *testing.T) install {
	t.Helper()
	var in install
	base := filepath.Join(rolloutsModuleDir(t), "manifests", "base")
	for file, out := range map[string]any{"argo-rollouts-deployment.yaml": &in.deployment, "argo-rollouts-config.yaml": &in.config} {
		data, err := os.ReadFile(filepath.Join(base, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, out); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	return in
}

// chartInstall is argo with the values added as the chart's templates do
// (templates/controller/deployment.yaml: initContainers as given, volumes
// and the controller container's volumeMounts after its own two,
// containerSecurityContext as the container's; configmap.yaml:
// trafficRouterPlugins as the list's YAML).
func chartInstall(t *testing.T, v helmValues, argo install) install {
	t.Helper()
	in := install{deployment: *argo.deployment.DeepCopy(), config: *argo.config.DeepCopy()}
	pod := &in.deployment.Spec.Template.Spec
	pod.InitContainers = v.Controller.InitContainers
	pod.Volumes = append(pod.Volumes, v.Controller.Volumes...)
	ctr := in.controller()
	ctr.VolumeMounts = append(ctr.VolumeMounts, v.Controller.VolumeMounts...)
	if v.ContainerSecurityContext != nil {
		ctr.SecurityContext = v.ContainerSecurityContext
	}
	plugins, err := yaml.Marshal(v.Controller.TrafficRouterPlugins)
	if err != nil {
		t.Fatal(err)
	}
	in.config.Data = map[string]string{"trafficRouterPlugins": string(plugins)}
	return in
}

// unknownKeys lists the key paths of values that are not the chart's, each
// as a problem: a key below a free-form value ({} or [] in the chart: a
// container, a volume) is the user's.
func unknownKeys(values map[string]any, keys map[string]string) []string {
	var out []string
	var walk func(m map[string]any, prefix string)
	walk = func(m map[string]any, prefix string) {
		for k, v := range m {
			p := prefix + k
			switch keys[p] {
			case "":
				out = append(out, fmt.Sprintf("%s is not a value of the chart (%s): fix its name or its place", p, chartKeysFile))
			case "map":
				if sub, ok := v.(map[string]any); ok {
					walk(sub, p+".")
				}
			}
		}
	}
	walk(values, "")
	slices.Sort(out)
	return out
}

// chartKeys reads chartKeysFile: each key path with the shape of its default.
func chartKeys(t *testing.T) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for _, line := range dataLines(t, chartKeysFile) {
		path, shape, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("%s: %q is not a key path, a tab and a shape", chartKeysFile, line)
		}
		keys[path] = shape
	}
	return keys
}

func chartPodLabels(t *testing.T) map[string]string {
	t.Helper()
	labels := map[string]string{}
	for _, line := range dataLines(t, chartPodLabelsFile) {
		k, v, _ := strings.Cut(line, "=")
		labels[k] = v
	}
	return labels
}

// dataLines are the lines of a testdata file but its comments.
func dataLines(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s is empty", file)
	}
	return out
}

// helmValuesBlock is the one ```helm-values block of the page at path: a
// fence TestDocumentedYAMLApplies does not apply, for the values are no
// object.
func helmValuesBlock(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```helm-values":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	if len(blocks) != 1 {
		t.Fatalf("%s has %d ```helm-values blocks, want one", path, len(blocks))
	}
	return blocks[0]
}

// withoutRouteClusters is the values without the lines marked for route
// clusters.
func withoutRouteClusters(values string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(values, "\n") {
		if !strings.HasSuffix(strings.TrimRight(line, "\n"), routeClusterMark) {
			b.WriteString(line)
		}
	}
	return b.String()
}

func parseValues(t *testing.T, values string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(values), &m); err != nil {
		t.Fatalf("the Helm values do not parse: %v\n%s", err, values)
	}
	return m
}
