package kube

import "testing"

// resourceVersionIn reads metadata.resourceVersion and says when there is
// none.
func TestResourceVersionIn(t *testing.T) {
	for _, tc := range []struct{ body, rv string }{
		{`{"apiVersion":"v1","kind":"K","metadata":{"name":"a","resourceVersion":"12"},"spec":{}}`, "12"},
		{`{"metadata":{"resourceVersion":"3"},"spec":`, "3"}, // nothing after metadata is read
		{`{"kind":"K","metadata":{"name":"a"}}`, ""},
		{`{"kind":"K"}`, ""},
		{`[]`, ""},
		{`{"metadata":{"resourceVersion":7}}`, ""},
	} {
		rv, err := resourceVersionIn([]byte(tc.body))
		if rv != tc.rv || (err == nil) != (tc.rv != "") {
			t.Errorf("%s: %q, %v; want %q", tc.body, rv, err, tc.rv)
		}
	}
}

// FuzzResourceVersionIn feeds any JSON object to the scanner and to
// encoding/json (make fuzz): they find the same resourceVersion, or neither
// finds one. The input is written again from its decoded form first, as the
// apiserver writes no key twice.
func FuzzResourceVersionIn(f *testing.F) {
	f.Add(servedJSON(f))
	f.Add([]byte(`{"kind":"K","metadata":{"labels":{"resourceVersion":"no"},"resourceVersion":"12"}}`))
	f.Add([]byte(`{"a":[1,{"b":"}"}],"metadata":{"name":"x\"y","resourceVersion":"7"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		canonical, ok := canonicalJSON(data)
		if !ok {
			return
		}
		want, wantErr := resourceVersionSlow(canonical)
		got, err := resourceVersionIn(canonical)
		if got != want || (err == nil) != (wantErr == nil) {
			t.Fatalf("scanner: %q, %v; encoding/json: %q, %v; for %s", got, err, want, wantErr, canonical)
		}
	})
}

// BenchmarkResourceVersionIn: the scanner against encoding/json on an answer.
func BenchmarkResourceVersionIn(b *testing.B) {
	data := servedJSON(b)
	b.Run("scanner", func(b *testing.B) {
		for b.Loop() {
			if _, err := resourceVersionIn(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := resourceVersionSlow(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
