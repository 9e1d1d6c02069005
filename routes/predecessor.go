package routes

import (
	"encoding/json"
	"fmt"
)

// PredecessorConfigMap is the ConfigMap in which the argoproj-labs/gatewayAPI
// plugin, up to its v0.12, recorded the header rules it added (its config
// key "configMap" names another), in the routes' namespace.
const PredecessorConfigMap = "argo-gatewayapi-configmap"

// PredecessorRecords is what that ConfigMap records, by route kind: for
// each managedRoutes entry, the index of the rule it added on each route
// (by route name). Its keys: httpManagedRoutes and grpcManagedRoutes.
type PredecessorRecords struct {
	HTTP map[string]map[string]int `json:"httpManagedRoutes,omitempty"`
	GRPC map[string]map[string]int `json:"grpcManagedRoutes,omitempty"`
}

// Indexes are the records of one route: the index of each entry's rule;
// nil when it has none.
func (p PredecessorRecords) Indexes(ref Ref) map[string]int {
	byEntry := p.HTTP
	if ref.Kind == GRPCRoute {
		byEntry = p.GRPC
	} else if ref.Kind != HTTPRoute {
		return nil
	}
	var out map[string]int
	for entry, byRoute := range byEntry {
		if i, ok := byRoute[ref.Name]; ok {
			if out == nil {
				out = map[string]int{}
			}
			out[entry] = i
		}
	}
	return out
}

// ReadPredecessorRecords reads the data of that ConfigMap; a key that is not
// what that plugin writes is an error naming it.
func ReadPredecessorRecords(data map[string]string) (PredecessorRecords, error) {
	var out PredecessorRecords
	for key, into := range map[string]*map[string]map[string]int{"httpManagedRoutes": &out.HTTP, "grpcManagedRoutes": &out.GRPC} {
		if v := data[key]; v != "" {
			if err := json.Unmarshal([]byte(v), into); err != nil {
				return PredecessorRecords{}, fmt.Errorf("key %s is not what the argoproj-labs/gatewayAPI plugin writes (%v): fix or remove it", key, err)
			}
		}
	}
	return out, nil
}
