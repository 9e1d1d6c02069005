package rollout

import (
	"strconv"
	"strings"
	"sync"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
)

// maxConfigs bounds Configs: past it, the Settings kept are dropped and
// the next call of each Rollout parses its config again.
const maxConfigs = 4096

// Configs keeps, for each Rollout, the Settings its config was parsed into
// last. The controller calls the plugin step after step with the same
// config, and ParseConfig reads nothing of the Rollout but the config, the
// canary Service, the managedRoutes names and the Rollout's namespace and
// name: a call that finds these as the last call did takes the Settings
// parsed then. Nothing changes Settings once parsed, so the calls share
// them. A config that does not parse is not kept: each call parses it
// again and fails the same way. The zero value is ready; a nil *Configs
// parses at every call.
type Configs struct {
	mu   sync.Mutex
	last map[types.NamespacedName]parsedConfig
}

type parsedConfig struct {
	input    string
	settings Settings
	envs     Envs
}

// Parse is ParseConfig, through the Settings kept for the Rollout, with
// the Envs of its routes for a process writing as fieldManager (kept with
// them: a Configs serves one process).
func (c *Configs) Parse(ro *v1alpha1.Rollout, pluginName, fieldManager string) (Settings, Envs, error) {
	rollout := Rollout{Namespace: ro.Namespace, Name: ro.Name}.String()
	if c == nil {
		s, err := ParseConfig(ro, pluginName)
		return s, s.envs(rollout, fieldManager, pluginName), err
	}
	key, input := types.NamespacedName{Namespace: ro.Namespace, Name: ro.Name}, configInput(ro, pluginName)
	input = strconv.Itoa(len(fieldManager)) + ":" + fieldManager + input
	c.mu.Lock()
	kept, ok := c.last[key]
	c.mu.Unlock()
	if ok && kept.input == input {
		return kept.settings, kept.envs, nil
	}
	s, err := ParseConfig(ro, pluginName)
	if err != nil {
		return s, Envs{}, err
	}
	envs := s.envs(rollout, fieldManager, pluginName)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || len(c.last) >= maxConfigs {
		c.last = map[types.NamespacedName]parsedConfig{}
	}
	c.last[key] = parsedConfig{input: input, settings: s, envs: envs}
	return s, envs, nil
}

// configInput is everything of ro that ParseConfig reads besides its
// namespace and name, as one string; "" when the config is missing (such a
// config fails to parse, so it is never kept).
func configInput(ro *v1alpha1.Rollout, pluginName string) string {
	c := ro.Spec.Strategy.Canary
	if c == nil || c.TrafficRouting == nil {
		return ""
	}
	raw, ok := c.TrafficRouting.Plugins[pluginName]
	if !ok {
		return ""
	}
	var b strings.Builder
	field := func(s string) { // length-prefixed: no two inputs read alike
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	field(pluginName)
	field(c.CanaryService)
	b.WriteString(strconv.Itoa(len(c.TrafficRouting.ManagedRoutes)))
	for _, m := range c.TrafficRouting.ManagedRoutes {
		field(m.Name)
	}
	field(string(raw))
	return b.String()
}
