package flux

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Each check of loadProblems and routeClusterProblems refuses what it is
// for: docs/install.md's builds (kustomize only, no apiserver), each broken
// one way, as a platform team could break it in an overlay of its own,
// must be refused with a problem that says so. Each build passes unbroken.
func TestLoadChecksRefuseBrokenInstalls(t *testing.T) {
	build := func(overlay map[string]any) install {
		_, byName := kustomizeBuild(t, installPage, overlay)
		in, err := installOf(byName)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	initContainer := build(docOverlay(t, "install/argo-rollouts"))
	withRouteCluster := docOverlay(t, "install/argo-rollouts")
	withRouteCluster["components"] = append(withRouteCluster["components"].([]any),
		"https://github.com/gatewayapi-ssa/rollouts-plugin//install/argo-rollouts-route-cluster?ref=v0.1.0")
	routeCluster := build(withRouteCluster)
	sum := sha256.Sum256([]byte("rollouts-gatewayapi-ssa-linux-amd64"))
	download := build(fillIn(t, docOverlay(t, "install/argo-rollouts-https"), shaPlaceholder, hex.EncodeToString(sum[:])))

	pod := func(in *install) *corev1.PodSpec { return &in.deployment.Spec.Template.Spec }
	setEntry := func(old, new string) func(*install) {
		return func(in *install) {
			in.config.Data["trafficRouterPlugins"] = strings.Replace(in.config.Data["trafficRouterPlugins"], old, new, 1)
		}
	}
	setSha := func(sha string) func(*install) {
		return setEntry(hex.EncodeToString(sum[:]), sha)
	}
	dropVolume := func(name string) func(*install) {
		return func(in *install) {
			var keep []corev1.Volume
			for _, v := range pod(in).Volumes {
				if v.Name != name {
					keep = append(keep, v)
				}
			}
			pod(in).Volumes = keep
		}
	}
	always := corev1.ContainerRestartPolicyAlways
	cases := []struct {
		name    string
		from    install
		breakIt func(*install)
		want    string
	}{
		{"the entry names another file", initContainer, setEntry("plugins/rollouts-gatewayapi-ssa", "plugins/gatewayapi"), "no init container copies the plugin to /home/argo-rollouts/plugins/gatewayapi"},
		{"the entry names a file on the image", initContainer, setEntry("/home/argo-rollouts/plugins/", "/bin/"), "nothing is mounted in container argo-rollouts where"},
		{"no init container", initContainer, func(in *install) { pod(in).InitContainers = nil }, "no init container copies"},
		{"the copy goes elsewhere", initContainer, func(in *install) { pod(in).InitContainers[0].Command[2] = "/tmp/rollouts-gatewayapi-ssa" }, "no init container copies"},
		{"the init container does not copy", initContainer, func(in *install) { pod(in).InitContainers[0].Command[1] = "version" }, "no init container copies"},
		{"the init container mounts another volume", initContainer, func(in *install) { pod(in).InitContainers[0].VolumeMounts[0].Name = "tmp" }, "no init container copies"},
		{"the init container is a sidecar", initContainer, func(in *install) { pod(in).InitContainers[0].RestartPolicy = &always }, "is a sidecar"},
		{"the controller does not mount the volume", initContainer, func(in *install) {
			c := in.controller()
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "gatewayapi-ssa-plugin" })
		}, "nothing is mounted in container argo-rollouts where"},
		{"the controller mounts a subPath", initContainer, func(in *install) {
			for i, m := range in.controller().VolumeMounts {
				if m.Name == "gatewayapi-ssa-plugin" {
					in.controller().VolumeMounts[i].SubPath = "bin"
				}
			}
		}, "with a subPath"},
		{"the volume is not the pod's", initContainer, dropVolume("gatewayapi-ssa-plugin"), "is not a volume of the pod"},
		{"the volume is a hostPath", initContainer, func(in *install) {
			for i := range pod(in).Volumes {
				if pod(in).Volumes[i].EmptyDir != nil && pod(in).Volumes[i].Name == "gatewayapi-ssa-plugin" {
					pod(in).Volumes[i].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/opt/plugins"}}
				}
			}
		}, "is not an emptyDir"},
		{"the root filesystem is writable", initContainer, func(in *install) { *in.controller().SecurityContext.ReadOnlyRootFilesystem = false }, "readOnlyRootFilesystem"},
		{"the securityContext is gone", initContainer, func(in *install) { in.controller().SecurityContext = nil }, "readOnlyRootFilesystem"},
		{"no entry", initContainer, setEntry(pluginName, "argoproj-labs/other"), "has 0 entries named"},
		{"a misspelt key", initContainer, setEntry("location:", "loaction:"), "does not parse"},
		{"the placeholder", download, setSha(shaPlaceholder), "sha256"},
		{"no sha256", download, setSha(""), "an empty one checks nothing"},
		{"an upper-case sha256", download, setSha(strings.ToUpper(hex.EncodeToString(sum[:]))), "64 lower-case hex digits"},
		{"63 digits", download, setSha(hex.EncodeToString(sum[:])[1:]), "64 lower-case hex digits"},
		{"the Component's key left", download, func(in *install) {
			in.config.Data["sha256-unset:patch-the-entry-and-remove-this-key"] = "docs/install.md"
		}, "the apiserver refuses"},
		{"plain http", download, setEntry("https://", "http://"), "neither file:// nor https://"},
		{"route cluster: no Secret volume", routeCluster, dropVolume("route-clusters"), "no Secret volume is mounted"},
		{"route cluster: no plugin volume", routeCluster, dropVolume("gatewayapi-ssa-plugin"), "is not a volume of the pod"},
	}
	problems := func(in install) []string { return append(loadProblems(in), routeClusterProblems(in)...) }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if p := problems(c.from); len(p) > 0 {
				t.Fatalf("unbroken, the build is refused already: %q", p)
			}
			in := install{deployment: *c.from.deployment.DeepCopy(), config: *c.from.config.DeepCopy()}
			c.breakIt(&in)
			got := problems(in)
			for _, p := range got {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Errorf("broken, the build is not refused with %q; the problems: %q", c.want, got)
		})
	}
}
