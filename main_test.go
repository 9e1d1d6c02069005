package main

import "testing"

// The plugin collects garbage at 50 % unless GOGC says otherwise.
func TestGCPercentIsFiftyUnlessGOGCIsSet(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	if p, ok := gcPercent(env(nil)); !ok || p != 50 {
		t.Errorf("without GOGC: %d, %v; want 50, true", p, ok)
	}
	for _, v := range []string{"100", "off", "200"} {
		if p, ok := gcPercent(env(map[string]string{"GOGC": v})); ok {
			t.Errorf("with GOGC=%s: set to %d; want GOGC left as it is", v, p)
		}
	}
}
