package dirsource_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/dirsource"
)

// benchResync measures one resync (Source.Resync) of an unchanged
// directory that prepare fills: the time until the relist is recorded.
func benchResync(b *testing.B, prepare func(dir string), tune func(*dirsource.Config[*obj])) {
	f := start(b, prepare, tune)
	waitRelists(b, f.src, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n := f.src.Status().Relists
		f.src.Resync()
		waitRelists(b, f.src, n+1)
	}
	if s := f.src.Status(); s.LastRelist.Upserts != 0 || s.FailingCount != 0 {
		b.Fatalf("a resync of an unchanged directory wrote or failed: %+v", s)
	}
}

func waitRelists(b *testing.B, src source.Source, n uint64) {
	deadline := time.Now().Add(time.Minute)
	for src.Status().Relists < n {
		if time.Now().After(deadline) {
			b.Fatalf("no relist: %+v", src.Status())
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// BenchmarkResync10kFiles: 10,000 manifests of 10 objects each.
func BenchmarkResync10kFiles(b *testing.B) {
	benchResync(b, func(dir string) {
		for i := range 10_000 {
			var sb strings.Builder
			for j := range 10 {
				fmt.Fprintf(&sb, "---\nkey: f%05d-%d\nvalue: v\n", i, j)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.yaml", i)), []byte(sb.String()), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}, nil)
}

// BenchmarkResync50MBFile: one manifest of 1000 objects of 50 kB each
// (over DefaultMaxFileSize, so the limit is raised).
func BenchmarkResync50MBFile(b *testing.B) {
	benchResync(b, func(dir string) {
		var sb strings.Builder
		big := strings.Repeat("x", 50_000)
		for j := range 1000 {
			fmt.Fprintf(&sb, "---\nkey: k%04d\nvalue: %s\n", j, big)
		}
		if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}, func(c *dirsource.Config[*obj]) { c.MaxFileSize = 64 << 20 })
}
