package rollout

import (
	"fmt"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
)

const (
	configA = `{"httpRoute": "web", "inProgressLabelKey": "a"}`
	configB = `{"httpRoute": "web", "inProgressLabelKey": "b"}`
)

// parsedBoth parses ro through configs and on its own, and fails unless
// both give the same Settings; it returns configs' Settings.
func parsedBoth(t *testing.T, configs *Configs, ro *v1alpha1.Rollout) Settings {
	t.Helper()
	got, _, err := configs.Parse(ro, DefaultPluginName, "argo-rollouts-gatewayapi")
	if err != nil {
		t.Fatalf("Configs.Parse: %v", err)
	}
	want, err := ParseConfig(ro, DefaultPluginName)
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	if diff := cmp.Diff(want, got, cfgCompareSelectors); diff != "" {
		t.Fatalf("Configs.Parse differs from ParseConfig (-want +got):\n%s", diff)
	}
	return got
}

// sameParse says whether a and b are one parse (they share their maps),
// not two equal ones.
func sameParse(a, b Settings) bool {
	return fmt.Sprintf("%p", a.InProgressLabel) == fmt.Sprintf("%p", b.InProgressLabel)
}

func TestAStepWithTheSameConfigTakesTheSettingsParsedBefore(t *testing.T) {
	configs := &Configs{}
	first := parsedBoth(t, configs, cfgRollout(DefaultPluginName, configA))
	second := parsedBoth(t, configs, cfgRollout(DefaultPluginName, configA))
	if !sameParse(first, second) {
		t.Error("the second call with the same config parsed it again")
	}
}

func TestAChangedRolloutIsParsedAgain(t *testing.T) {
	changes := map[string]func(*v1alpha1.Rollout){
		"config": func(ro *v1alpha1.Rollout) {
			ro.Spec.Strategy.Canary.TrafficRouting.Plugins[DefaultPluginName] = []byte(configB)
		},
		"canaryService": func(ro *v1alpha1.Rollout) { ro.Spec.Strategy.Canary.CanaryService = "web-preview" },
		"managedRoutes": func(ro *v1alpha1.Rollout) {
			ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "header"}}
		},
		"namespace": func(ro *v1alpha1.Rollout) { ro.Namespace = "shop-2" },
		"name":      func(ro *v1alpha1.Rollout) { ro.Name = "web-2" },
	}
	for what, change := range changes {
		t.Run(what, func(t *testing.T) {
			configs := &Configs{}
			before := parsedBoth(t, configs, cfgRollout(DefaultPluginName, configA))
			ro := cfgRollout(DefaultPluginName, configA)
			change(ro)
			if after := parsedBoth(t, configs, ro); sameParse(before, after) {
				t.Errorf("a Rollout whose %s changed took the Settings of the one before", what)
			}
		})
	}
}

func TestABrokenConfigFailsEveryTime(t *testing.T) {
	configs := &Configs{}
	parsedBoth(t, configs, cfgRollout(DefaultPluginName, configA))
	broken := cfgRollout(DefaultPluginName, `{"httpRoute": "web", "inProgressLabelKey": 7}`)
	for i := range 2 {
		if _, _, err := configs.Parse(broken, DefaultPluginName, "argo-rollouts-gatewayapi"); err == nil {
			t.Fatalf("call %d: a config that does not parse gave Settings", i+1)
		}
	}
	if _, _, err := configs.Parse(cfgRollout("other/plugin", configA), DefaultPluginName, "argo-rollouts-gatewayapi"); err == nil {
		t.Fatal("a Rollout without the plugin's config gave Settings")
	}
}

func TestConfigsKeepABoundedNumberOfRollouts(t *testing.T) {
	configs := &Configs{}
	for i := range maxConfigs + 1 {
		ro := cfgRollout(DefaultPluginName, configA)
		ro.Name = fmt.Sprintf("web-%d", i)
		if _, _, err := configs.Parse(ro, DefaultPluginName, "argo-rollouts-gatewayapi"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(configs.last); n > maxConfigs {
		t.Errorf("Configs keeps %d Rollouts, more than %d", n, maxConfigs)
	}
}

func TestNoConfigsParsesEveryTime(t *testing.T) {
	var configs *Configs
	first := parsedBoth(t, configs, cfgRollout(DefaultPluginName, configA))
	if sameParse(first, parsedBoth(t, configs, cfgRollout(DefaultPluginName, configA))) {
		t.Error("a nil *Configs kept what it parsed")
	}
}
