package ssa

import (
	"encoding"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// The shortcut past the typed apply configuration. A typed configuration
// carries an object exactly when every key in it is a JSON field of the
// configuration's types, spelled as the types spell it, holding a value of
// the JSON type the field decodes (an object, a list, a string, an integer in
// the field's range, a boolean). Apply configurations are made of pointers
// and of lists and maps left out when empty, so such an object comes back
// from decoding and encoding as it went in, except that a null and an empty
// list or map are left out (which means the same as an absent field). shape
// walks the object once and writes that JSON itself (encode), with no
// decoding into the types and no second encoding; what it cannot vouch for
// (an unknown key, another type, a type with JSON methods of its own, a
// field of another kind) goes through the full round trip of
// decodeLossless, which says what would be lost. shape_test.go checks, over
// generated rules of every kind and version, that whatever encode writes is
// what the round trip's configuration encodes to. Filling and encoding the
// typed configuration instead makes the plugin execute more instructions
// per route written (docs/performance/cpu-per-route.md).

// shape is what a typed apply configuration holds at one place of its JSON
// form.
type shape struct {
	kind reflect.Kind
	// fields are an object's JSON fields (kind Struct); elem is what a list
	// or a map (kind Slice, Map) holds.
	fields map[string]*shape
	elem   *shape
	// opaque types decode themselves, or (objects) have a field that is
	// neither a pointer nor a list or map tagged omitempty, which would not
	// come back as it went: only the round trip can tell.
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
		if !leftOutWhenEmpty(f.Type, opts) {
			s.opaque = true
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

// leftOutWhenEmpty says whether a field of type t with the tag options opts
// is left out of the JSON exactly when the JSON it was decoded from had it
// null or absent (a pointer to anything but a list or map), or null, absent
// or empty (a list or map tagged omitempty).
func leftOutWhenEmpty(t reflect.Type, opts string) bool {
	switch t.Kind() {
	case reflect.Pointer:
		switch t.Elem().Kind() {
		case reflect.Slice, reflect.Map, reflect.Array, reflect.Pointer:
			return false
		}
		return true
	case reflect.Slice, reflect.Map:
		return strings.Contains(","+opts+",", ",omitempty,")
	}
	return false
}

// encode appends v, a value in its JSON form, as the typed configuration of
// shape s would encode it after decoding it, and says false if it cannot
// vouch for that (the round trip must decide). Object keys are written in
// sorted order.
func (s *shape) encode(buf []byte, v any) ([]byte, bool) {
	if s.opaque {
		return buf, false
	}
	switch t := v.(type) {
	case map[string]any:
		return s.encodeObject(buf, t)
	case routes.Rule:
		return s.encodeObject(buf, t)
	case map[string]string:
		if s.kind != reflect.Map || s.elem.opaque || s.elem.kind != reflect.String {
			return buf, false
		}
		buf = append(buf, '{')
		var on [16]string
		for i, k := range sortedKeys(t, on[:0]) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(appendString(buf, k), ':')
			buf = appendString(buf, t[k])
		}
		return append(buf, '}'), true
	case []any:
		return encodeList(s, buf, t)
	case []routes.Rule:
		return encodeList(s, buf, t)
	case string:
		return appendString(buf, t), s.kind == reflect.String
	case bool:
		return strconv.AppendBool(buf, t), s.kind == reflect.Bool
	case int64:
		// The decoder refuses a number out of the field's range: no
		// silent loss, but the round trip says so.
		return strconv.AppendInt(buf, t, 10), fits(s.kind, t)
	}
	return buf, false
}

// encodeObject is encode of an object: the fields of a struct (a null, or
// an empty list or map, left out), or the entries of a map.
func (s *shape) encodeObject(buf []byte, m map[string]any) ([]byte, bool) {
	if s.kind != reflect.Struct && s.kind != reflect.Map {
		return buf, false
	}
	buf = append(buf, '{')
	first := true
	ok := true
	var on [16]string
	for _, k := range sortedKeys(m, on[:0]) {
		e := m[k]
		f := s.elem
		if s.kind == reflect.Struct {
			if f = s.fields[k]; f == nil {
				return buf, false
			}
			if leftOut(f, e) {
				continue
			}
		} else if e == nil {
			return buf, false // a null in a map would come back as the zero value
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(appendString(buf, k), ':')
		if buf, ok = f.encode(buf, e); !ok {
			return buf, false
		}
	}
	return append(buf, '}'), true
}

// sortedKeys is m's keys in order, appended to keys: an object's fields fit
// in an array on the caller's stack.
func sortedKeys[V any](m map[string]V, keys []string) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// encodeList is encode of a list (a null in it, which would come back as
// its type's zero value, makes the round trip decide: encode takes no null).
func encodeList[E any](s *shape, buf []byte, l []E) ([]byte, bool) {
	if s.kind != reflect.Slice {
		return buf, false
	}
	buf = append(buf, '[')
	ok := true
	for i, e := range l {
		if i > 0 {
			buf = append(buf, ',')
		}
		if buf, ok = s.elem.encode(buf, e); !ok {
			return buf, false
		}
	}
	return append(buf, ']'), true
}

// leftOut says whether a field of shape f holding v is left out of the
// typed configuration's JSON: a null, or an empty list in a list field, or
// an empty object in a map field.
func leftOut(f *shape, v any) bool {
	if v == nil {
		return true
	}
	if f.opaque {
		return false
	}
	switch t := v.(type) {
	case []any:
		return len(t) == 0 && f.kind == reflect.Slice
	case []routes.Rule:
		return len(t) == 0 && f.kind == reflect.Slice
	case map[string]any:
		return len(t) == 0 && f.kind == reflect.Map
	case map[string]string:
		return len(t) == 0 && f.kind == reflect.Map
	}
	return false
}

// fits says whether n is in the range of an integer of kind k.
func fits(k reflect.Kind, n int64) bool {
	switch k {
	case reflect.Int8:
		return n >= math.MinInt8 && n <= math.MaxInt8
	case reflect.Int16:
		return n >= math.MinInt16 && n <= math.MaxInt16
	case reflect.Int32:
		return n >= math.MinInt32 && n <= math.MaxInt32
	case reflect.Int, reflect.Int64:
		return true
	case reflect.Uint8:
		return n >= 0 && n <= math.MaxUint8
	case reflect.Uint16:
		return n >= 0 && n <= math.MaxUint16
	case reflect.Uint32:
		return n >= 0 && n <= math.MaxUint32
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return n >= 0
	}
	return false
}

// appendString appends str as a JSON string, escaped as encoding/json
// escapes it.
func appendString(buf []byte, str string) []byte {
	for i := 0; i < len(str); i++ {
		if c := str[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, _ := json.Marshal(str) // a string always encodes
			return append(buf, quoted...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, str...)
	return append(buf, '"')
}
