package routes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
)

// What a route's managedFields say about who owns what. The apiserver records
// ownership of the atomic spec.rules list as one field, so "owns spec.rules"
// is all or nothing; see DESIGN.md §2.

// ManagedFields is a route's metadata.managedFields and what they say, for
// every manager: a call asks who owns spec.rules, labels and annotations
// several times (its decision, the predecessor's rules, the write's guard,
// the ownership review), about field managers known only per call, and the
// entries are parsed for all of them once.
//
// The entries and their parse are bound together by NewManagedFields, where
// a route is read, and cannot be set apart: a route whose entries change (a
// test's, plan's route after an apply) gets new ManagedFields, so no route
// can carry the parse of other entries. The parse itself is made at the
// first question, not when the route is decoded: a watch cache decodes
// every version of every route, and calls ask about few of them (a
// VerifyWeight's fresh read asks nothing). A route passed by value keeps
// its parse; a DeepCopy shares it once it is made.
type ManagedFields struct {
	entries []metav1.ManagedFieldsEntry
	parse   *parse // nil for no entries
}

// parse is the entries' parse, made once.
type parse struct {
	once   sync.Once
	done   atomic.Bool // owners is made: a DeepCopy may share it
	owners []owner     // one per entry, in their order
}

// owner is what one managedFields entry says, as the questions below read
// it. The three ways a field set may not parse are kept apart as the
// questions have always asked them: a set that is not the plugin's idea of
// one (a label that is not an object) still says whether it holds
// spec.rules. Who wrote the entry is read from the entry itself.
type owner struct {
	// rules: the field set holds spec.rules; a set that does not parse
	// holds nothing. Asked of every entry, whatever its operation.
	rules bool
	// rulesRead: the set parses as far as spec.rules (OwnsRules, which
	// asks only Apply entries, passes over one that does not).
	rulesRead bool
	// read: the set parses as the fields Owned reads; owned is them.
	read  bool
	owned Owned
}

// NewManagedFields binds entries to their parse. The ManagedFields keeps
// the slice itself: it is the route's, and nothing changes it.
func NewManagedFields(entries []metav1.ManagedFieldsEntry) ManagedFields {
	if len(entries) == 0 {
		return ManagedFields{entries: entries}
	}
	return ManagedFields{entries: entries, parse: &parse{}}
}

// Entries are the managedFields entries as read. They are the route's: a
// caller that wants other entries makes other ManagedFields.
func (m ManagedFields) Entries() []metav1.ManagedFieldsEntry { return m.entries }

// owners parses the entries, the first time it is asked.
func (m ManagedFields) owners() []owner {
	if m.parse == nil {
		return nil
	}
	m.parse.once.Do(func() {
		m.parse.owners = make([]owner, len(m.entries))
		for i, e := range m.entries {
			m.parse.owners[i] = readOwner(e)
		}
		m.parse.done.Store(true)
	})
	return m.parse.owners
}

// Equal says whether m and o hold the same entries (their parse follows
// from them), times compared as instants. go-cmp compares ManagedFields
// through it.
func (m ManagedFields) Equal(o ManagedFields) bool {
	return equality.Semantic.DeepEqual(m.entries, o.entries)
}

// DeepCopy copies the entries, and shares the parse once it is made
// (nothing changes it). One not made yet the copy makes of its own entries:
// a caller that changed its copy's entries (as it must not) before the
// first question could otherwise change what the original says.
func (m ManagedFields) DeepCopy() ManagedFields {
	if m.entries == nil {
		return m
	}
	out := ManagedFields{entries: make([]metav1.ManagedFieldsEntry, len(m.entries))}
	for i := range m.entries {
		m.entries[i].DeepCopyInto(&out.entries[i])
	}
	switch {
	case m.parse == nil:
	case m.parse.done.Load():
		out.parse = m.parse
	default:
		out.parse = &parse{}
	}
	return out
}

// fieldSet is what the plugin reads of a managedFields entry's field set
// (the nested "f:..." object the apiserver records): the keys under
// f:metadata's f:labels and f:annotations, and whether f:spec holds f:rules.
// Decoding into it skips the rest of the set instead of building a map of
// every field, as a decode into map[string]any would.
type fieldSet struct {
	Metadata struct {
		Labels      map[string]struct{} `json:"f:labels"`
		Annotations map[string]struct{} `json:"f:annotations"`
	} `json:"f:metadata"`
	Spec rulesSet `json:"f:spec"`
}

// rulesSet is what spec.rules' questions read of f:spec.
type rulesSet struct {
	Rules *struct{} `json:"f:rules"`
}

// rulesKey and labelsKey are what a field set holding spec.rules or labels
// names somewhere, spelled as the apiserver spells them: a set that names
// neither (and escapes nothing, which could spell them otherwise) holds
// neither, whatever else it holds.
var rulesKey, labelsKey = []byte(`"f:rules"`), []byte(`"f:labels"`)

// readOwner parses one entry's field set. Keys are matched
// case-sensitively, as the apiserver writes them. A set that parses as a
// fieldSet parses as far as spec.rules too (the same f:spec, read the same
// way), so the second parse is made only of a set that does not. Of an
// Update entry only whether it holds spec.rules and its labels are asked
// (LabelOwners): one that names no labels is parsed only as far as
// spec.rules, and only when it names them.
func readOwner(e metav1.ManagedFieldsEntry) owner {
	var o owner
	if e.FieldsV1 == nil {
		return o
	}
	raw := e.FieldsV1.GetRawBytes()
	named := bytes.Contains(raw, rulesKey)
	noLabels := !bytes.Contains(raw, labelsKey) && bytes.IndexByte(raw, '\\') < 0
	if e.Operation != metav1.ManagedFieldsOperationApply && noLabels {
		if named {
			o.rules, o.rulesRead = readRules(raw, named)
		}
		return o
	}
	var fields fieldSet
	if sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &fields) == nil {
		o.read, o.rulesRead = true, true
		o.owned = Owned{Labels: fieldKeys(fields.Metadata.Labels), Annotations: fieldKeys(fields.Metadata.Annotations), Rules: fields.Spec.Rules != nil}
		o.rules = named && o.owned.Rules
		return o
	}
	o.rules, o.rulesRead = readRules(raw, named)
	return o
}

// readRules reads whether a field set holds spec.rules, and whether it
// parses that far; named says whether it names f:rules at all (one that
// does not is only checked to be JSON).
func readRules(raw []byte, named bool) (holds, parses bool) {
	if !named {
		return false, json.Valid(raw)
	}
	var set struct {
		Spec rulesSet `json:"f:spec"`
	}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &set) != nil {
		return false, false
	}
	return set.Spec.Rules != nil, true
}

// Owned is what one manager owns through Apply that the plugin reads: its
// label and annotation keys and whether it owns spec.rules. The slices are
// the ManagedFields': not to be changed.
type Owned struct {
	Labels, Annotations []string
	Rules               bool
}

// Owned is what the manager owns through Apply: what the first of its Apply
// entries whose field set parses says.
func (m ManagedFields) Owned(manager string) Owned {
	for i, o := range m.owners() {
		if e := &m.entries[i]; e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && o.read {
			return o.owned
		}
	}
	return Owned{}
}

// fieldKeys lists the names of a field set's "f:<name>" keys, sorted.
func fieldKeys(set map[string]struct{}) []string {
	var keys []string
	for k := range set {
		if key, ok := strings.CutPrefix(k, "f:"); ok {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}

// OwnsRules says whether the manager owns spec.rules through Apply: what
// the first of its Apply entries whose set parses as far as spec.rules
// says.
func (m ManagedFields) OwnsRules(manager string) bool {
	for i, o := range m.owners() {
		if e := &m.entries[i]; e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && o.rulesRead {
			return o.rules
		}
	}
	return false
}

// WroteRules says whether manager owns spec.rules, by an apply or an
// update: the rules are as it last wrote them (anyone who changed them since
// took them from it).
func (m ManagedFields) WroteRules(manager string) bool {
	for i, o := range m.owners() {
		if o.rules && m.entries[i].Manager == manager {
			return true
		}
	}
	return false
}

// RulesOwners lists the other managers that own spec.rules, as
// "name (Apply)" or "name (Update, apiVersion)".
func (m ManagedFields) RulesOwners(except string) []string {
	var out []string
	for i, o := range m.owners() {
		if o.rules && m.entries[i].Manager != except {
			out = append(out, ownerName(&m.entries[i]))
		}
	}
	sort.Strings(out)
	return out
}

// ownerName names an entry's manager as "name (Apply)" or
// "name (Update, apiVersion)".
func ownerName(e *metav1.ManagedFieldsEntry) string {
	if e.Operation == metav1.ManagedFieldsOperationApply {
		return fmt.Sprintf("%s (Apply)", e.Manager)
	}
	return fmt.Sprintf("%s (%s, %s)", e.Manager, e.Operation, e.APIVersion)
}

// LabelOwners lists the managers but those in except that own label key,
// by an apply or an update, named as RulesOwners names them.
func (m ManagedFields) LabelOwners(key string, except ...string) []string {
	var out []string
	for i, o := range m.owners() {
		if o.read && !slices.Contains(except, m.entries[i].Manager) && slices.Contains(o.owned.Labels, key) {
			out = append(out, ownerName(&m.entries[i]))
		}
	}
	sort.Strings(out)
	return out
}

// OwnsAnything says whether the manager has any managedFields entry.
func (m ManagedFields) OwnsAnything(manager string) bool {
	for _, e := range m.entries {
		if e.Manager == manager {
			return true
		}
	}
	return false
}
