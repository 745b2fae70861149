package reconciler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// The serialized forms of statuses: a StatusKind as its name (text, JSON,
// YAML), and a StatusSet as an object with a status per name. Decoding is
// strict: an unknown kind or field is an error, never a silent zero.

// MarshalText returns the kind's name. An invalid kind gives an error
// wrapping ErrUnknownStatusKind: writing "StatusKind(9)" would produce text
// that cannot be read back.
func (k StatusKind) MarshalText() ([]byte, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("marshal %v: %w", k, ErrUnknownStatusKind)
	}
	return []byte(statusKindNames[k]), nil
}

// UnmarshalText sets k to the kind named by text, as ParseStatusKind does.
// On error k is left unchanged.
func (k *StatusKind) UnmarshalText(text []byte) error {
	parsed, err := ParseStatusKind(string(text))
	if err != nil {
		return err
	}
	*k = parsed
	return nil
}

// MarshalJSON returns the kind's name as a JSON string, e.g. "Done". An
// invalid kind gives an error wrapping ErrUnknownStatusKind.
func (k StatusKind) MarshalJSON() ([]byte, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("marshal %v: %w", k, ErrUnknownStatusKind)
	}
	return []byte(`"` + statusKindNames[k] + `"`), nil
}

// UnmarshalJSON sets k from a JSON string holding a kind's name. Anything
// else fails with an error wrapping ErrUnknownStatusKind: numbers, unknown
// or lower-case names, the empty string, and null. encoding/json's habit of
// treating null as "leave unchanged" is refused on purpose, so that a null
// kind cannot silently become Pending. On error k is left unchanged.
func (k *StatusKind) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '"' {
		return fmt.Errorf("%w: want a JSON string, got %s", ErrUnknownStatusKind, statusSnippet(data))
	}
	var name string
	if err := json.Unmarshal(data, &name); err != nil {
		return fmt.Errorf("%w: %w", ErrUnknownStatusKind, err)
	}
	return k.UnmarshalText([]byte(name))
}

// MarshalYAML returns the kind's name, so YAML shows "kind: Done". An
// invalid kind gives an error wrapping ErrUnknownStatusKind.
func (k StatusKind) MarshalYAML() (any, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("marshal %v: %w", k, ErrUnknownStatusKind)
	}
	return statusKindNames[k], nil
}

// UnmarshalYAML sets k from a string scalar holding a kind's name (plain or
// quoted). Sequences, mappings, non-string scalars (numbers, booleans,
// null) and unknown names fail with an error wrapping ErrUnknownStatusKind.
//
// yaml.v3 does not call unmarshalers for null values, so "kind: ~" inside
// a larger document decodes to the zero value, Pending, the same as a
// missing "kind" key. StatusSet's decoder rejects it.
func (k *StatusKind) UnmarshalYAML(n *yaml.Node) error {
	n = yamlResolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return fmt.Errorf("%w: want a string scalar, got %s at line %d",
			ErrUnknownStatusKind, yamlNodeDescription(n), n.Line)
	}
	return k.UnmarshalText([]byte(n.Value))
}

// statusSnippet quotes at most the first 32 bytes of a rejected input, so
// an error message stays short however large the input.
func statusSnippet(data []byte) string {
	const limit = 32
	if len(data) > limit {
		return strconv.Quote(string(data[:limit])) + "..."
	}
	return strconv.Quote(string(data))
}

// yamlNodeDescription names a node's kind and tag for error messages.
func yamlNodeDescription(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.ShortTag() + " " + statusSnippet([]byte(n.Value))
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	default:
		return "an empty node"
	}
}

// yamlResolve unwraps a document node and follows aliases, which
// yaml.v3 leaves to the caller of a Node.
func yamlResolve(n *yaml.Node) *yaml.Node {
	for {
		switch {
		case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
			n = n.Content[0]
		case n.Kind == yaml.AliasNode && n.Alias != nil:
			n = n.Alias
		default:
			return n
		}
	}
}

// statusSetWire is the serialized form of a StatusSet. encoding/json and
// yaml.v3 both write map keys sorted, so the output is deterministic.
type statusSetWire struct {
	ID       uint64            `json:"id" yaml:"id"`
	Statuses map[string]Status `json:"statuses,omitempty" yaml:"statuses,omitempty"`
}

// wire converts s for marshalling. It fails if a name is not valid UTF-8:
// JSON would replace the bad bytes (two names could become one) and YAML
// would write a binary key, so the document could not be read back.
func (s StatusSet) wire() (statusSetWire, error) {
	w := statusSetWire{ID: s.id}
	if len(s.statuses) > 0 {
		w.Statuses = make(map[string]Status, len(s.statuses))
	}
	for _, ns := range s.statuses {
		if !utf8.ValidString(ns.name) {
			return w, fmt.Errorf("%w: name %q is not valid UTF-8", ErrMalformedStatusSet, ns.name)
		}
		w.Statuses[ns.name] = ns.status
	}
	return w, nil
}

// MarshalJSON returns {"id":N,"statuses":{...}} with names sorted and
// "statuses" left out when the set is empty. It fails, wrapping
// ErrMalformedStatusSet, for a name that is not valid UTF-8, and wrapping
// ErrUnknownStatusKind for a status with an invalid kind.
func (s StatusSet) MarshalJSON() ([]byte, error) {
	w, err := s.wire()
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// UnmarshalJSON sets s from the form MarshalJSON writes. It is strict: the
// value must be an object whose only fields are "id" (an unsigned integer)
// and "statuses" (an object of statuses), each at most once; a status may
// only have the fields of Status, and its kind must be known; a name may
// appear only once; null is refused for the set, "id", "statuses" and each
// status. Failures wrap ErrMalformedStatusSet, or ErrUnknownStatusKind for
// a bad kind. On error s is left unchanged.
func (s *StatusSet) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var out StatusSet
	err := statusSetWalkJSON(dec, "the status set", func(field string) error {
		switch field {
		case "id":
			return statusSetDecodeJSON(dec, "id", &out.id)
		case "statuses":
			return statusSetWalkJSON(dec, `"statuses"`, func(name string) error {
				var st Status
				err := statusSetDecodeJSON(dec, fmt.Sprintf("status %q", name), &st)
				out.statuses = append(out.statuses, namedStatus{name: name, status: st})
				return err
			})
		default:
			return fmt.Errorf("%w: unknown field %q", ErrMalformedStatusSet, field)
		}
	})
	if err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the status set", ErrMalformedStatusSet)
	}
	out.sortByName()
	*s = out
	return nil
}

// statusSetWalkJSON reads an object from dec, calling fn for each key with
// dec positioned at the key's value, which fn must consume. A repeated key
// fails.
func statusSetWalkJSON(dec *json.Decoder, what string, fn func(key string) error) error {
	if err := statusSetExpectDelim(dec, '{', what); err != nil {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrMalformedStatusSet, what, err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("%w: %s: %q given twice", ErrMalformedStatusSet, what, key)
		}
		seen[key] = true
		if err := fn(key); err != nil {
			return err
		}
	}
	return statusSetExpectDelim(dec, '}', what)
}

// statusSetDecodeJSON decodes the next value from dec into v, refusing
// null and, in a status, unknown fields.
func statusSetDecodeJSON(dec *json.Decoder, what string, v any) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformedStatusSet, what, err)
	}
	if string(raw) == "null" {
		return fmt.Errorf("%w: %s is null", ErrMalformedStatusSet, what)
	}
	// A decoder of its own: DisallowUnknownFields does not reach into a
	// RawMessage.
	inner := json.NewDecoder(bytes.NewReader(raw))
	inner.DisallowUnknownFields()
	if err := inner.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformedStatusSet, what, err)
	}
	return nil
}

// statusSetExpectDelim reads one token from dec and fails unless it is
// want.
func statusSetExpectDelim(dec *json.Decoder, want json.Delim, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformedStatusSet, what, err)
	}
	if tok != want {
		if want == '{' {
			return fmt.Errorf("%w: %s must be an object, got %v", ErrMalformedStatusSet, what, tok)
		}
		return fmt.Errorf("%w: %s: want %v, got %v", ErrMalformedStatusSet, what, want, tok)
	}
	return nil
}

// sortByName sorts decoded statuses; the decoders have already refused
// repeated names.
func (s *StatusSet) sortByName() {
	slices.SortFunc(s.statuses, func(a, b namedStatus) int {
		return strings.Compare(a.name, b.name)
	})
}

// MarshalYAML returns the same shape as MarshalJSON, as a YAML mapping
// with names sorted. It fails as MarshalJSON does.
func (s StatusSet) MarshalYAML() (any, error) {
	return s.wire()
}

// statusFieldNames are the YAML keys of Status; statusset_test.go checks
// them against the struct tags.
var statusFieldNames = []string{"kind", "updated-at", "error", "id"}

// UnmarshalYAML sets s from the form MarshalYAML writes, as strictly as
// UnmarshalJSON: a mapping with only "id" and "statuses", string keys
// only, no key twice, no unknown status fields, a non-null known kind in
// every status. Failures wrap ErrMalformedStatusSet, or
// ErrUnknownStatusKind for a bad kind. On error s is left unchanged.
//
// yaml.v3 does not call unmarshalers for null, so "statuses: ~" in a
// user's object decodes to the zero StatusSet.
func (s *StatusSet) UnmarshalYAML(n *yaml.Node) error {
	var out StatusSet
	err := statusSetWalkYAML(n, "the status set", []string{"id", "statuses"}, false, func(key string, v *yaml.Node) error {
		if key == "id" {
			if err := v.Decode(&out.id); err != nil {
				return fmt.Errorf("%w: id: %w", ErrMalformedStatusSet, err)
			}
			return nil
		}
		return statusSetWalkYAML(v, `"statuses"`, nil, false, func(name string, v *yaml.Node) error {
			st, err := statusSetDecodeYAMLStatus(name, v)
			out.statuses = append(out.statuses, namedStatus{name: name, status: st})
			return err
		})
	})
	if err != nil {
		return err
	}
	out.sortByName()
	*s = out
	return nil
}

// statusSetDecodeYAMLStatus decodes one status strictly.
func statusSetDecodeYAMLStatus(name string, n *yaml.Node) (Status, error) {
	var st Status
	what := fmt.Sprintf("status %q", name)
	// Status fields may be null, as in JSON, except the kind: yaml.v3
	// would turn a null kind into Pending without asking StatusKind.
	err := statusSetWalkYAML(n, what, statusFieldNames, true, func(key string, v *yaml.Node) error {
		if key == "kind" && v.ShortTag() == "!!null" {
			return fmt.Errorf("%w: %s: kind is null", ErrUnknownStatusKind, what)
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	if err := n.Decode(&st); err != nil {
		return st, fmt.Errorf("%w: %s: %w", ErrMalformedStatusSet, what, err)
	}
	return st, nil
}

// statusSetWalkYAML calls fn for each key and alias-resolved value of the
// mapping n, after checking that n is a mapping whose keys are unique
// strings and, when known is not nil, each in known. A null value is
// refused unless allowNull.
func statusSetWalkYAML(n *yaml.Node, what string, known []string, allowNull bool, fn func(key string, v *yaml.Node) error) error {
	n = yamlResolve(n)
	if n.Kind != yaml.MappingNode || n.ShortTag() != "!!map" {
		return fmt.Errorf("%w: %s must be a mapping, got %s at line %d",
			ErrMalformedStatusSet, what, yamlNodeDescription(n), n.Line)
	}
	if len(n.Content)%2 != 0 {
		return fmt.Errorf("%w: %s: mapping with a key and no value", ErrMalformedStatusSet, what)
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i < len(n.Content); i += 2 {
		k, v := yamlResolve(n.Content[i]), yamlResolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			return fmt.Errorf("%w: %s: key must be a string, got %s at line %d",
				ErrMalformedStatusSet, what, yamlNodeDescription(k), k.Line)
		}
		if known != nil && !slices.Contains(known, k.Value) {
			return fmt.Errorf("%w: %s: unknown field %q at line %d", ErrMalformedStatusSet, what, k.Value, k.Line)
		}
		if seen[k.Value] {
			return fmt.Errorf("%w: %s: %q given twice at line %d", ErrMalformedStatusSet, what, k.Value, k.Line)
		}
		seen[k.Value] = true
		if !allowNull && v.ShortTag() == "!!null" {
			return fmt.Errorf("%w: %s: %q is null at line %d", ErrMalformedStatusSet, what, k.Value, v.Line)
		}
		if err := fn(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}
