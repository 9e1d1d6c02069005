package routes

import "testing"

// A route's apiVersion is its group and version, a constant (no copy kept
// per Event) for every version the plugin serves.
func TestAPIVersionIsAConstant(t *testing.T) {
	for _, k := range Kinds {
		for _, v := range k.Versions() {
			if got, want := APIVersion(v), Group+"/"+v; got != want {
				t.Errorf("APIVersion(%q) = %q; want %q", v, got, want)
			}
			if n := testing.AllocsPerRun(10, func() { _ = APIVersion(v) }); n != 0 {
				t.Errorf("APIVersion(%q) allocates %v times", v, n)
			}
		}
	}
	if got := APIVersion("v9"); got != Group+"/v9" {
		t.Errorf("APIVersion(v9) = %q", got)
	}
}
