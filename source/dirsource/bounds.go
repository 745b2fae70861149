package dirsource

import (
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/converge-go/converge/source"
)

// The bounds of one YAML document, checked on its node tree before it is
// decoded into a type. yaml/v3 compares every pair of keys of a mapping
// (and builds an error for each pair of equal keys) whenever it decodes
// the mapping, so a mapping of many keys, or one expanded many times by
// aliases, costs the square of its size: a 16 KB manifest of one repeated
// key took 15 s and 1.6 GB. The node tree is built in time linear in the
// document, and these bounds make what follows linear too.
const (
	// MaxKeys bounds the keys of one mapping.
	MaxKeys = 1000
	// MaxNodes bounds the nodes of one document (scalars, mappings,
	// sequences, keys included), aliases expanded: an alias counts the
	// nodes of what it refers to.
	MaxNodes = 100_000
	// MaxExpandedBytes bounds the bytes of one document's scalars
	// (keys included), aliases expanded: what a decoded document, or an
	// error quoting each of its unknown fields, can hold.
	MaxExpandedBytes = 16 << 20
	// MaxKeyWork bounds the work of comparing keys pairwise, summed over
	// the document's mappings, aliases expanded: a mapping of k keys of b
	// bytes together counts k×b.
	MaxKeyWork = 256 << 20
)

// ErrTooComplex is wrapped by the error of a document over one of the
// bounds above (MaxKeys, MaxNodes, MaxExpandedBytes, MaxKeyWork).
var ErrTooComplex = errors.New("document too complex")

// size is what a node costs, aliases expanded.
type size struct{ nodes, bytes, keyWork int }

func (s *size) add(o size) {
	s.nodes += o.nodes
	s.bytes += o.bytes
	s.keyWork += o.keyWork
}

func (s size) check() error {
	switch {
	case s.nodes > MaxNodes:
		return fmt.Errorf("%w: over %d nodes, aliases expanded", ErrTooComplex, MaxNodes)
	case s.bytes > MaxExpandedBytes:
		return fmt.Errorf("%w: over %d bytes, aliases expanded", ErrTooComplex, MaxExpandedBytes)
	case s.keyWork > MaxKeyWork:
		return fmt.Errorf("%w: its mappings' keys, aliases expanded, would cost over %d bytes of comparisons (keys × key bytes)",
			ErrTooComplex, MaxKeyWork)
	}
	return nil
}

// checker walks a node tree once, each node once: an anchored node's
// size is remembered for the aliases that refer to it.
type checker struct {
	anchored map[*yaml.Node]size
	open     map[*yaml.Node]bool // anchored nodes being walked
}

// checkDocument returns an error if the document n refuses a key repeated
// in one mapping or is over one of the bounds; its time is linear in the
// node tree.
func checkDocument(n *yaml.Node) error {
	c := checker{anchored: map[*yaml.Node]size{}, open: map[*yaml.Node]bool{}}
	_, err := c.walk(n)
	return err
}

func (c *checker) walk(n *yaml.Node) (size, error) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return size{}, nil // yaml refuses it when it decodes
		}
		if c.open[n.Alias] {
			return size{}, fmt.Errorf("line %d: anchor %s contains itself", n.Line, source.Quote(n.Value))
		}
		s, err := c.walk(n.Alias)
		s.nodes++
		return s, err
	}
	if n.Anchor != "" {
		if s, ok := c.anchored[n]; ok {
			return s, nil
		}
		c.open[n] = true
		defer delete(c.open, n)
	}
	s := size{nodes: 1, bytes: len(n.Value)}
	if n.Kind == yaml.MappingNode {
		if err := repeatedKey(n); err != nil {
			return s, err
		}
	}
	var keys size
	for i, child := range n.Content {
		cs, err := c.walk(child)
		if err != nil {
			return s, err
		}
		s.add(cs)
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			keys.add(cs)
		}
		if err := s.check(); err != nil {
			return s, err
		}
	}
	if n.Kind == yaml.MappingNode {
		s.keyWork += len(n.Content) / 2 * keys.bytes
	}
	if err := s.check(); err != nil {
		return s, err
	}
	if n.Anchor != "" {
		c.anchored[n] = s
	}
	return s, nil
}

// repeatedKey returns an error for a mapping of more than MaxKeys keys,
// or one with a key it has already had (yaml/v3's test: the same kind
// and the same text), in time linear in the mapping.
func repeatedKey(n *yaml.Node) error {
	type key struct {
		kind  yaml.Kind
		value string
	}
	seen := make(map[key]int, min(len(n.Content)/2, MaxKeys))
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if first, ok := seen[key{k.Kind, k.Value}]; ok {
			return fmt.Errorf("line %d: mapping key %s already defined at line %d", k.Line, source.Quote(k.Value), first)
		}
		if len(seen) == MaxKeys {
			return fmt.Errorf("line %d: %w: a mapping of %d keys, over %d", n.Line, ErrTooComplex, len(n.Content)/2, MaxKeys)
		}
		seen[key{k.Kind, k.Value}] = k.Line
	}
	return nil
}
