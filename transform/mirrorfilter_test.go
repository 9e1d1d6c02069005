package transform

import (
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

func TestSchemaErrorSaysWhatToDo(t *testing.T) {
	r := routes.Route{Ref: routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: "web"}, Version: "v1", Schema: routes.Schema{LacksRuleNames: true, LacksMirrorPercent: true}}
	err := checkMirrorPercent(r, "mirror", 25)
	want := `mirror route "mirror": mirroring 25% of the requests needs spec.rules[].filters[].requestMirror.percent, which the installed HTTPRoute CRD (v1) does not have: ` +
		`it is in Gateway API v1.3 (standard channel; the experimental channel has it since v1.2) and later; upgrade the Gateway API CRDs, or mirror every request (leave the step's percentage out, or set it to 100)`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
	if err := checkMirrorPercent(r, "mirror", 100); err != nil {
		t.Errorf("100%% needs no percentage: %v", err)
	}
	r.Schema.LacksMirrorPercent = false
	if err := checkMirrorPercent(r, "mirror", 25); err != nil {
		t.Errorf("a CRD with the field: %v", err)
	}
}
