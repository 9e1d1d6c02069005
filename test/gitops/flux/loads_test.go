package flux

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// pluginName is the name the plugin is registered under.
const pluginName = "argoproj-labs/gatewayAPI"

// controllerContainer is the container of Argo Rollouts' Deployment that
// loads and runs the plugins.
const controllerContainer = "argo-rollouts"

// install is what a build (or the Helm values) gives the controller: its
// Deployment and its ConfigMap argo-rollouts-config.
type install struct {
	deployment appsv1.Deployment
	config     corev1.ConfigMap
}

// installOf converts a build's objects, by kind and name.
func installOf(byName map[string]*unstructured.Unstructured) (install, error) {
	var in install
	d, cm := byName["Deployment/argo-rollouts"], byName["ConfigMap/argo-rollouts-config"]
	if d == nil || cm == nil {
		return in, fmt.Errorf("the build has no Deployment argo-rollouts or no ConfigMap argo-rollouts-config")
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, &in.deployment); err != nil {
		return in, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cm.Object, &in.config); err != nil {
		return in, err
	}
	return in, nil
}

// pluginItem is an entry of trafficRouterPlugins as Argo Rollouts v1.10.1
// reads it (utils/plugin/types PluginItem), read strictly here: Argo
// Rollouts ignores a misspelt key, such as a sha256 that is then not checked.
type pluginItem struct {
	Name        string           `json:"name"`
	Location    string           `json:"location"`
	Sha256      string           `json:"sha256,omitempty"`
	Args        []string         `json:"args,omitempty"`
	HeadersFrom []map[string]any `json:"headersFrom,omitempty"`
}

// entry is the plugin's entry of the ConfigMap.
func (in install) entry() (pluginItem, error) {
	var items []pluginItem
	if err := yaml.UnmarshalStrict([]byte(in.config.Data["trafficRouterPlugins"]), &items); err != nil {
		return pluginItem{}, fmt.Errorf("argo-rollouts-config's trafficRouterPlugins does not parse as Argo Rollouts' plugin list (%v): fix the entry's YAML", err)
	}
	var found []pluginItem
	for _, it := range items {
		if it.Name == pluginName {
			found = append(found, it)
		}
	}
	if len(found) != 1 {
		return pluginItem{}, fmt.Errorf("argo-rollouts-config's trafficRouterPlugins has %d entries named %s, want one", len(found), pluginName)
	}
	return found[0], nil
}

// controller is the controller's container.
func (in install) controller() *corev1.Container {
	for i, c := range in.deployment.Spec.Template.Spec.Containers {
		if c.Name == controllerContainer {
			return &in.deployment.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

// configKey is what the apiserver takes as a ConfigMap key
// (k8s.io/apimachinery validation IsConfigMapKey).
var configKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// sha256Hex is a sha256 as Argo Rollouts compares it: 64 lower-case hex
// digits (utils/plugin/downloader.go checkShaOfPlugin, fmt's %x).
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// loadProblems lists what would keep Argo Rollouts v1.10.1 from loading the
// plugin when the controller starts (utils/plugin/downloader.go
// DownloadPlugins, whose error controller/controller.go makes fatal), or the
// apiserver from taking the ConfigMap, each saying what to fix; none when
// the plugin loads.
func loadProblems(in install) []string {
	var problems []string
	for k := range in.config.Data {
		if !configKey.MatchString(k) {
			problems = append(problems, fmt.Sprintf("argo-rollouts-config has key %q, which the apiserver refuses: your overlay's patch removes it once the entry has your sha256 (docs/install.md)", k))
		}
	}
	ctr := in.controller()
	if ctr == nil {
		return append(problems, "Deployment argo-rollouts has no container "+controllerContainer)
	}
	if sc := ctr.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		problems = append(problems, "container argo-rollouts lost readOnlyRootFilesystem: true: keep Argo Rollouts' securityContext, and put the plugin in a volume")
	}
	entry, err := in.entry()
	if err != nil {
		return append(problems, err.Error())
	}
	u, err := url.Parse(entry.Location)
	if err != nil {
		return append(problems, fmt.Sprintf("the entry's location %q is not a URL: %v", entry.Location, err))
	}
	switch u.Scheme {
	case "file":
		problems = append(problems, fileProblems(in.deployment.Spec.Template.Spec, *ctr, path.Clean(u.Host+u.Path))...)
	case "https":
		if !sha256Hex.MatchString(entry.Sha256) {
			problems = append(problems, fmt.Sprintf("the entry's sha256 %q is not the 64 lower-case hex digits make release prints for the file: a wrong one crash-loops the controller, an empty one checks nothing", entry.Sha256))
		}
	default:
		problems = append(problems, fmt.Sprintf("the entry's location %q is neither file:// nor https://", entry.Location))
	}
	return problems
}

// fileProblems lists what keeps the file at file, in the controller's
// container ctr, from being the plugin when the controller starts: it must
// be in an emptyDir of the pod, which an init container (not a sidecar,
// which the controller does not wait for) writes with the plugin's copy.
func fileProblems(pod corev1.PodSpec, ctr corev1.Container, file string) []string {
	mount, rel := mountOf(ctr.VolumeMounts, file)
	if mount == nil {
		return []string{fmt.Sprintf("nothing is mounted in container argo-rollouts where the entry's location %s is: mount the plugin's emptyDir at %s (install/argo-rollouts/deployment.yaml); its root filesystem is read-only", file, path.Dir(file))}
	}
	if mount.SubPath != "" || mount.SubPathExpr != "" {
		return []string{fmt.Sprintf("container argo-rollouts mounts volume %s at %s with a subPath: mount the whole volume", mount.Name, mount.MountPath)}
	}
	vol := volumeOf(pod, mount.Name)
	if vol == nil {
		return []string{fmt.Sprintf("volume %s, which container argo-rollouts mounts at %s, is not a volume of the pod: add it as an emptyDir", mount.Name, mount.MountPath)}
	}
	if vol.EmptyDir == nil {
		return []string{fmt.Sprintf("volume %s, where the entry's location %s is, is not an emptyDir: the init container copies the plugin into an emptyDir of the pod", vol.Name, file)}
	}
	var problems []string
	for _, ic := range pod.InitContainers {
		for _, m := range ic.VolumeMounts {
			if m.Name != vol.Name || m.SubPath != "" || m.SubPathExpr != "" {
				continue
			}
			cmd := append(append([]string{}, ic.Command...), ic.Args...)
			dest := path.Join(m.MountPath, rel)
			if len(cmd) < 2 || cmd[len(cmd)-2] != "copy" || path.Clean(cmd[len(cmd)-1]) != dest {
				continue
			}
			if ic.RestartPolicy != nil {
				problems = append(problems, fmt.Sprintf("init container %s is a sidecar (restartPolicy %s): the controller may start before it has copied the plugin; drop restartPolicy", ic.Name, *ic.RestartPolicy))
				continue
			}
			return problems
		}
	}
	return append(problems, fmt.Sprintf("no init container copies the plugin to %s, in volume %s that container argo-rollouts mounts at %s: its command must end with copy <its mount of %s>/%s (install/argo-rollouts/deployment.yaml)", file, vol.Name, mount.MountPath, vol.Name, rel))
}

// routeClusterProblems lists the -route-cluster kubeconfigs of the entry
// that no Secret volume of the pod holds.
func routeClusterProblems(in install) []string {
	entry, err := in.entry()
	if err != nil {
		return []string{err.Error()}
	}
	ctr := in.controller()
	if ctr == nil {
		return []string{"Deployment argo-rollouts has no container " + controllerContainer}
	}
	var problems []string
	for _, a := range entry.Args {
		spec, ok := strings.CutPrefix(a, "-route-cluster=")
		if !ok {
			continue
		}
		_, file, _ := strings.Cut(spec, "=")
		mount, _ := mountOf(ctr.VolumeMounts, path.Clean(file))
		var vol *corev1.Volume
		if mount != nil {
			vol = volumeOf(in.deployment.Spec.Template.Spec, mount.Name)
		}
		if vol == nil || vol.Secret == nil {
			problems = append(problems, fmt.Sprintf("%s: no Secret volume is mounted in container argo-rollouts where the kubeconfig is: mount Secret rollouts-gatewayapi-ssa-route-clusters (install/argo-rollouts-route-cluster)", a))
		}
	}
	return problems
}

// mountOf is the mount of mounts that file is in (the deepest, as the
// kernel resolves nested mounts), and file's path inside it.
func mountOf(mounts []corev1.VolumeMount, file string) (*corev1.VolumeMount, string) {
	var best *corev1.VolumeMount
	var rel string
	for i, m := range mounts {
		dir := path.Clean(m.MountPath)
		r, ok := strings.CutPrefix(file, strings.TrimSuffix(dir, "/")+"/")
		if ok && r != "" && (best == nil || len(dir) > len(path.Clean(best.MountPath))) {
			best, rel = &mounts[i], r
		}
	}
	return best, rel
}

func volumeOf(pod corev1.PodSpec, name string) *corev1.Volume {
	for i, v := range pod.Volumes {
		if v.Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}
