package desired

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// equalJSON answers as reflect.DeepEqual does on every pair of these
// values: nil and empty maps and lists differ, as do numbers of different
// types, and a map that misses a key holding nil.
func TestEqualJSONAsDeepEqual(t *testing.T) {
	values := []any{
		nil, "a", "b", int64(1), int64(2), float64(1), true, false,
		map[string]any(nil), map[string]any{}, map[string]any{"k": nil}, map[string]any{"j": nil},
		map[string]any{"k": int64(1)}, map[string]any{"k": float64(1)},
		map[string]any{"k": []any{"a", map[string]any{"w": int64(1)}}},
		map[string]any{"k": []any{"a", map[string]any{"w": int64(2)}}},
		[]any(nil), []any{}, []any{nil}, []any{int64(1), "a"}, []any{"a", int64(1)},
		map[string]string{"k": "v"}, []string{"a"},
	}
	for _, a := range values {
		for _, b := range values {
			// Each value against an equal copy of the other too.
			for _, bb := range []any{b, deepCopyOf(b)} {
				if got, want := equalJSON(a, bb), reflect.DeepEqual(a, bb); got != want {
					t.Errorf("equalJSON(%#v, %#v) = %v; DeepEqual says %v", a, bb, got, want)
				}
			}
		}
	}
}

// deepCopyOf copies maps and lists of JSON values; a value of another
// type (which DeepCopyJSONValue refuses) is its own copy here.
func deepCopyOf(v any) any {
	switch v.(type) {
	case map[string]any, []any:
		return runtime.DeepCopyJSONValue(v)
	}
	return v
}
