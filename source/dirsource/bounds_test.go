package dirsource_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/converge-go/converge/internal/lineartest"
	"github.com/converge-go/converge/source/dirsource"
)

// repeatedKeys is a mapping of n copies of one key (issue 52: 2,000 of
// them, 16 KB, took 15 s and 1.6 GB, and a 120 MB error).
func repeatedKeys(n int) []byte {
	return []byte(strings.Repeat("name: x\n", n))
}

// distinctKeys is a mapping of n different keys (issue 52: 40,000 of
// them took 45 s, without any error).
func distinctKeys(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "k%07d: 1\n", i)
	}
	return []byte(b.String())
}

// fullMappings is n documents, each a mapping of MaxKeys keys of the
// same length that differ only at their end: within the bounds, and each
// one as costly as yaml's pairwise check of keys makes a mapping.
func fullMappings(n int) []byte {
	var b strings.Builder
	for d := range n {
		b.WriteString("---\n")
		for i := range dirsource.MaxKeys {
			fmt.Fprintf(&b, "%s%05d%05d: 1\n", strings.Repeat("k", 40), d, i)
		}
	}
	return []byte(b.String())
}

// aliasedMapping is a mapping of MaxKeys keys that n aliases refer to,
// in a sequence: the aliases expand it n times.
func aliasedMapping(n int) []byte {
	var b strings.Builder
	b.WriteString("- &m\n")
	for i := range dirsource.MaxKeys {
		fmt.Fprintf(&b, "  k%05d: 1\n", i)
	}
	b.WriteString(strings.Repeat("- *m\n", n))
	return []byte(b.String())
}

// aliasUnits is n times a mapping of 50 keys and 20 aliases of it: the
// aliases expand each mapping 20 times, and the input grows with n.
func aliasUnits(n int) []byte {
	var b strings.Builder
	for u := range n {
		fmt.Fprintf(&b, "- &m%d\n", u)
		for i := range 50 {
			fmt.Fprintf(&b, "  k%05d: 1\n", i)
		}
		b.WriteString(strings.Repeat(fmt.Sprintf("- *m%d\n", u), 20))
	}
	return []byte(b.String())
}

type anyDoc = map[string]any

// The cases of issue 52 are refused at once, with a short error.
func TestDecodeYAMLRefusesHostileMappings(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"2,000 repeated keys", repeatedKeys(2000), `line 2: mapping key "name" already defined at line 1`},
		{"40,000 distinct keys", distinctKeys(40000), "a mapping of 40000 keys, over 1000"},
		{"over MaxNodes", []byte(strings.Repeat("- 1\n", dirsource.MaxNodes)), "over 100000 nodes"},
		{"aliases over MaxNodes", []byte("a: &s [" + strings.Repeat("1, ", 1000) + "]\nb: [" + strings.Repeat("*s, ", 100) + "]\n"), "over 100000 nodes"},
		{"aliases over MaxKeyWork", aliasedMapping(60), "keys × key bytes"},
		{"long keys aliased", []byte("- &m\n  ? " + strings.Repeat("k", 100_000) + "a\n  : 1\n  ? " + strings.Repeat("k", 100_000) + "b\n  : 2\n" + strings.Repeat("- *m\n", 1000)),
			"over 16777216 bytes"},
		{"anchor in itself", []byte("a: &x [1, *x]\n"), `anchor "x" contains itself`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, opts := range [][]dirsource.DecodeOption{nil, {dirsource.Lenient()}} {
				_, err := dirsource.DecodeYAML[anyDoc](tc.data, opts...)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want one containing %q", err, tc.want)
				}
				if len(err.Error()) > 300 {
					t.Fatalf("a %d-byte error", len(err.Error()))
				}
			}
		})
	}
	if _, err := dirsource.DecodeYAML[anyDoc](distinctKeys(40000)); !errors.Is(err, dirsource.ErrTooComplex) {
		t.Fatalf("error %v, want ErrTooComplex", err)
	}
}

// What is within the bounds decodes.
func TestDecodeYAMLWithinBounds(t *testing.T) {
	got, err := dirsource.DecodeYAML[anyDoc](fullMappings(2))
	if err != nil || len(got) != 2 || len(got[1]) != dirsource.MaxKeys {
		t.Fatalf("%d documents, %v", len(got), err)
	}
	seqs, err := dirsource.DecodeYAML[[]anyDoc](aliasedMapping(40))
	if err != nil || len(seqs) != 1 || len(seqs[0]) != 41 {
		t.Fatalf("%d documents, %v", len(seqs), err)
	}
	// The largest input of TestDecodeYAMLHostileIsLinear's aliases.
	if seqs, err := dirsource.DecodeYAML[[]anyDoc](aliasUnits(40)); err != nil || len(seqs[0]) != 40*21 {
		t.Fatalf("aliasUnits(40): %v", err)
	}
}

// A document of many unknown fields makes an error of a bounded number
// of messages.
func TestDecodeYAMLErrorCountBounded(t *testing.T) {
	_, err := dirsource.DecodeYAML[svc](distinctKeys(900))
	if err == nil || !strings.Contains(err.Error(), "and 890 more") || len(err.Error()) > 2000 {
		t.Fatalf("error (%d bytes) %.300v", len(err.Error()), err)
	}
}

func TestDecodeYAMLHostileIsLinear(t *testing.T) {
	for _, tc := range []struct {
		name string
		gen  func(int) []byte
		n    int
	}{
		{"repeated keys", repeatedKeys, 2000},
		{"distinct keys", distinctKeys, 5000},
		{"full mappings", fullMappings, 1},
		{"aliased mappings", aliasUnits, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lineartest.Check(t, tc.n, tc.gen, func(data []byte) { _, _ = dirsource.DecodeYAML[anyDoc](data) })
		})
	}
}

// BenchmarkDecodeYAMLWorst decodes manifests of DefaultMaxFileSize (4
// MiB) built to cost the most within the bounds, for the figures of
// docs/security.md: one-byte list items (the densest node tree, refused
// over MaxNodes once yaml has built it), repeated keys, mappings of
// MaxKeys keys with long common prefixes, and one such mapping expanded by
// aliases up to MaxKeyWork.
//
//	go test -run '^$' -bench DecodeYAMLWorst -benchmem ./source/dirsource
func BenchmarkDecodeYAMLWorst(b *testing.B) {
	size := dirsource.DefaultMaxFileSize
	fill := func(unit string) []byte { return []byte(strings.Repeat(unit, size/len(unit))) }
	var full strings.Builder
	for d := 0; full.Len() < size-60_000; d++ {
		full.WriteString("---\n")
		for i := range dirsource.MaxKeys {
			fmt.Fprintf(&full, "%s%05d%05d: 1\n", strings.Repeat("k", 40), d, i)
		}
	}
	var aliased strings.Builder
	aliased.WriteString("- &m\n")
	for i := range dirsource.MaxKeys {
		fmt.Fprintf(&aliased, "  %s%05d: 1\n", strings.Repeat("k", 100), i)
	}
	// 1,000 keys of 105 bytes: 105 MB of key work per expansion.
	aliased.WriteString(strings.Repeat("- *m\n", 1))
	for name, data := range map[string][]byte{
		"list items":       fill("- 1\n"),
		"flow list items":  []byte("[" + strings.Repeat("1,", size/2-1) + "]"),
		"repeated keys":    fill("name: x\n"),
		"full mappings":    []byte(full.String()),
		"aliased mappings": []byte(aliased.String()),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				_, _ = dirsource.DecodeYAML[anyDoc](data)
			}
		})
	}
}
