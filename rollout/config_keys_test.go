package rollout

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// docs/config-keys.md lists every key the decoder accepts, and only those.
func TestConfigKeysDocumentedAsDecoded(t *testing.T) {
	data, err := os.ReadFile("../docs/config-keys.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		documented = append(documented, m[1])
	}
	var c Config
	var decoded []string
	for key, into := range c.fields() {
		decoded = append(decoded, key)
		if reflect.TypeOf(into).Elem() == reflect.TypeOf([]NamedRoute{}) {
			entry := reflect.TypeOf(NamedRoute{})
			for i := range entry.NumField() {
				tag, _, _ := strings.Cut(entry.Field(i).Tag.Get("json"), ",")
				decoded = append(decoded, key+"[]."+tag)
			}
		}
	}
	slices.Sort(documented)
	slices.Sort(decoded)
	if diff := cmp.Diff(decoded, documented); diff != "" {
		t.Errorf("docs/config-keys.md vs the decoder (-decoded +documented):\n%s", diff)
	}
}
