package reconciler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// StatusSet holds the statuses of several named reconcilers that share one
// object. Each reconciler's Config reads and writes its own entry:
//
//	GetObjectStatus: func(o *Obj) reconciler.Status { return o.Statuses.Get("routes") },
//	SetObjectStatus: func(o *Obj, s reconciler.Status) *Obj {
//		o.Statuses = o.Statuses.Set("routes", s)
//		return o
//	},
//
// and the user calls Pending when the object's data changes.
//
// A StatusSet is an immutable value: every method returns a new set and
// never writes to memory the receiver shares, so a set may be read from an
// object in a table while a clone of the object gets a modified copy. The
// zero value is an empty set with ID 0; NewStatusSet gives a fresh ID.
//
// In JSON and YAML a set is {"id": N, "statuses": {"name": Status, ...}}
// with "statuses" left out when empty. Decoding is strict (see
// UnmarshalJSON) and the creation time is not kept: a decoded set has a
// zero creation time.
type StatusSet struct {
	// id is the pending request every absent name belongs to.
	id uint64
	// createdAt stamps the Pending status that Get gives for absent names.
	createdAt time.Time
	// statuses is sorted by name, names unique. It is never written to
	// after the set is built: Set and Pending copy it.
	statuses []namedStatus
}

// namedStatus is one reconciler's entry in a StatusSet.
type namedStatus struct {
	name   string
	status Status
}

// NewStatusSet returns an empty set with a fresh ID, created now: every
// name is Pending until set.
func NewStatusSet() StatusSet {
	return StatusSet{id: newStatusID(), createdAt: time.Now()}
}

// Pending returns a copy of the set for an object whose data changed: a
// fresh ID, created now, and every name that the set holds made Pending
// with that ID (names are kept so String shows who still has to act).
func (s StatusSet) Pending() StatusSet {
	out := StatusSet{id: newStatusID(), createdAt: time.Now()}
	if len(s.statuses) > 0 {
		out.statuses = make([]namedStatus, len(s.statuses))
		for i, ns := range s.statuses {
			out.statuses[i] = namedStatus{
				name:   ns.name,
				status: Status{Kind: StatusKindPending, UpdatedAt: out.createdAt, ID: out.id},
			}
		}
	}
	return out
}

// Set returns a copy of the set with name's status replaced by st (or
// added). The receiver is left unchanged. Any string is a valid name, but
// only valid UTF-8 names can be marshalled.
func (s StatusSet) Set(name string, st Status) StatusSet {
	i, found := s.search(name)
	var out []namedStatus
	if found {
		out = slices.Clone(s.statuses)
		out[i].status = st
	} else {
		out = make([]namedStatus, len(s.statuses)+1)
		copy(out, s.statuses[:i])
		out[i] = namedStatus{name: name, status: st}
		copy(out[i+1:], s.statuses[i:])
	}
	s.statuses = out
	return s
}

// Get returns name's status. A name the set does not hold is Pending with
// the set's ID and creation time: a new reconciler, or one that has not
// run since the last Pending, has work to do. Get does not allocate.
func (s StatusSet) Get(name string) Status {
	if i, found := s.search(name); found {
		return s.statuses[i].status
	}
	return Status{Kind: StatusKindPending, UpdatedAt: s.createdAt, ID: s.id}
}

// search returns where name is, or where it would be inserted, in the
// sorted statuses. A hand-written binary search so Get stays free of
// allocations and closures.
func (s StatusSet) search(name string) (int, bool) {
	lo, hi := 0, len(s.statuses)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.statuses[mid].name < name {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(s.statuses) && s.statuses[lo].name == name
}

// Names returns the names the set holds, sorted. The slice is new and the
// caller may modify it.
func (s StatusSet) Names() []string {
	names := make([]string, len(s.statuses))
	for i, ns := range s.statuses {
		names[i] = ns.name
	}
	return names
}

// All yields each held name and its status, sorted by name.
func (s StatusSet) All() iter.Seq2[string, Status] {
	return func(yield func(string, Status) bool) {
		for _, ns := range s.statuses {
			if !yield(ns.name, ns.status) {
				return
			}
		}
	}
}

// Len returns how many names the set holds.
func (s StatusSet) Len() int {
	return len(s.statuses)
}

// String returns a compact summary, one group per kind, groups ordered by
// kind name and names sorted within a group, e.g.
//
//	Done: a b; Error: c (boom); Pending: d
//
// An error message follows its name in parentheses. A name that is empty
// or holds anything but letters, digits and "-_./" is quoted. An empty set
// gives "(none)". The output depends only on the held names and statuses.
func (s StatusSet) String() string {
	if len(s.statuses) == 0 {
		return "(none)"
	}
	var kinds []StatusKind
	for _, ns := range s.statuses {
		if !slices.Contains(kinds, ns.status.Kind) {
			kinds = append(kinds, ns.status.Kind)
		}
	}
	slices.SortFunc(kinds, func(a, b StatusKind) int {
		return strings.Compare(a.String(), b.String())
	})
	var b strings.Builder
	for i, kind := range kinds {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(kind.String())
		b.WriteString(":")
		for _, ns := range s.statuses {
			if ns.status.Kind != kind {
				continue
			}
			b.WriteString(" ")
			b.WriteString(statusSetDisplayName(ns.name))
			if ns.status.Error != "" {
				b.WriteString(" (" + ns.status.Error + ")")
			}
		}
	}
	return b.String()
}

// statusSetDisplayName quotes names that would make String ambiguous.
func statusSetDisplayName(name string) string {
	plain := name != ""
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("-_./", r) {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	return strconv.Quote(name)
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
