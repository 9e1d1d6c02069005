package ssa

import (
	"encoding"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// The cheap half of the lossless check. A typed apply configuration carries a
// route's rules exactly when every key in them is a JSON field of the
// configuration's types, spelled as the types spell it, holding a value of
// the JSON type the field decodes (an object, a list, a string, an integer, a
// boolean). Apply configurations are made of pointers and slices only, so
// such a value comes back from decoding and encoding as it went in, empty
// lists and nulls excepted, which mean the same as an absent field. shape
// answers that by walking the rules once, with no encoding at all; what it
// cannot vouch for (an unknown key, another type, a type with JSON methods of
// its own) goes through the full round trip of decodeLossless, which says
// what would be lost. shape_test.go checks, over generated rules, that every
// rule shape accepts is one the round trip finds lossless.

// shape is what a typed apply configuration holds at one place of its JSON
// form.
type shape struct {
	kind reflect.Kind
	// fields are an object's JSON fields (kind Struct); elem is what a list
	// or a map (kind Slice, Map) holds.
	fields map[string]*shape
	elem   *shape
	// opaque types decode themselves: only the round trip can tell.
	opaque bool
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// shapeOf is the JSON shape of t as encoding/json decodes into it.
func shapeOf(t reflect.Type) *shape {
	return shapeIn(t, map[reflect.Type]*shape{})
}

func shapeIn(t reflect.Type, seen map[reflect.Type]*shape) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := seen[t]; ok {
		return s
	}
	s := &shape{kind: t.Kind()}
	seen[t] = s
	p := reflect.PointerTo(t)
	if p.Implements(jsonUnmarshaler) || p.Implements(jsonMarshaler) || p.Implements(textUnmarshaler) {
		s.opaque = true
		return s
	}
	switch t.Kind() {
	case reflect.Struct:
		s.fields = map[string]*shape{}
		depth := map[string]int{}
		addFields(t, 0, s, depth, seen)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			s.opaque = true // bytes travel as a base64 string
			return s
		}
		s.kind = reflect.Slice
		s.elem = shapeIn(t.Elem(), seen)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			s.opaque = true
		}
		s.elem = shapeIn(t.Elem(), seen)
	case reflect.Interface, reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		s.opaque = true
	}
	return s
}

// addFields adds a struct's JSON fields, those of embedded structs included
// as encoding/json inlines them: the shallowest field of a name wins, and two
// of one name at one depth make the object opaque (encoding/json drops both).
func addFields(t reflect.Type, at int, s *shape, depth map[string]int, seen map[reflect.Type]*shape) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addFields(ft, at+1, s, depth, seen)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		switch d, ok := depth[name]; {
		case !ok || at < d:
			depth[name] = at
			s.fields[name] = shapeIn(f.Type, seen)
			if strings.Contains(","+opts+",", ",string,") {
				s.fields[name] = &shape{opaque: true} // a number or boolean in a string
			}
		case at == d:
			s.opaque = true
		}
	}
}

// carries says whether the typed configuration carries v, a value in its JSON
// form, exactly at s.
func (s *shape) carries(v any) bool {
	if s.opaque {
		return false
	}
	switch t := v.(type) {
	case nil:
		return true // an object's field: the same as absent
	case map[string]any:
		switch s.kind {
		case reflect.Struct:
			for k, e := range t {
				if f, ok := s.fields[k]; !ok || !f.carries(e) {
					return false
				}
			}
			return true
		case reflect.Map:
			return s.elem.carriesEach(slices.Collect(maps.Values(t)))
		}
		return false
	case []any:
		return s.kind == reflect.Slice && s.elem.carriesEach(t)
	case string:
		return s.kind == reflect.String
	case bool:
		return s.kind == reflect.Bool
	case int64:
		// The decoder refuses a number out of the field's range: that is no
		// silent loss.
		switch s.kind {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return true
		}
	}
	return false
}

// carriesEach says whether s carries every value of a list or a map. A null
// there is no absent field: it would come back as its type's zero value.
func (s *shape) carriesEach(vs []any) bool {
	for _, v := range vs {
		if v == nil || !s.carries(v) {
			return false
		}
	}
	return true
}

// carriesRules says whether every rule is carried exactly by rules, the shape
// of one entry of spec.rules.
func carriesRules[R ~map[string]any](rules *shape, rs []R) bool {
	if rules == nil {
		return false
	}
	for _, r := range rs {
		if !rules.carries(map[string]any(r)) {
			return false
		}
	}
	return true
}

// rulesShape is the shape of one entry of spec.rules in the apply
// configuration type t, nil if it has none.
func rulesShape(t reflect.Type) *shape {
	spec := shapeOf(t).fields["spec"]
	if spec == nil || spec.fields["rules"] == nil {
		return nil
	}
	return spec.fields["rules"].elem
}
