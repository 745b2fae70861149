package dirsource_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/dirsource"
)

// shadowLine stands for a line of a file only root may read.
const shadowLine = "root:$6$Hx1rOq2JfQYz0t4j$Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Lw0123456789:19000:0:99999:7:::"

// leaks reports whether msg holds more than source.MaxQuoted bytes in a
// row of s.
func leaks(msg, s string) bool {
	for i := 0; i+source.MaxQuoted < len(s); i++ {
		if strings.Contains(msg, s[i:i+source.MaxQuoted+1]) {
			return true
		}
	}
	return false
}

// A manifest that is a symlink to a file outside the directory (one only
// root may read, say) is refused and reported on its name, never read;
// links that stay inside (a ConfigMap mount's "..data" layout, an
// absolute link to a file of the directory) are followed. With
// AllowSymlinksOutside the outside file is read, and its errors still
// quote only a short prefix of it.
func TestSymlinksOutsideTheDirectory(t *testing.T) {
	outside := t.TempDir()
	secretFile := filepath.Join(outside, "shadow.yaml")
	// Strict decoding used to quote an unknown key whole.
	write(t, secretFile, "key: s\n"+shadowLine+": 1\n")
	must(t, os.Chmod(secretFile, 0o600))
	goodOutside := filepath.Join(outside, "good.yaml")
	write(t, goodOutside, "key: o1\nvalue: out\n")
	layout := func(dir string) {
		write(t, filepath.Join(dir, "a.yaml"), aYAML)
		must(t, os.Symlink(secretFile, filepath.Join(dir, "shadow.yaml")))
		must(t, os.Symlink(goodOutside, filepath.Join(dir, "out.yaml")))
		// A ConfigMap mount: c.yaml -> ..data/c.yaml, ..data -> ..2026_01_01.
		must(t, os.Mkdir(filepath.Join(dir, "..2026_01_01"), 0o755))
		write(t, filepath.Join(dir, "..2026_01_01", "c.yaml"), "key: c1\nvalue: cm\n")
		must(t, os.Symlink("..2026_01_01", filepath.Join(dir, "..data")))
		must(t, os.Symlink("..data/c.yaml", filepath.Join(dir, "c.yaml")))
		// An absolute link that stays inside.
		write(t, filepath.Join(dir, "..2026_01_01", "d.yaml"), "key: d1\nvalue: abs\n")
		must(t, os.Symlink(filepath.Join(dir, "..2026_01_01", "d.yaml"), filepath.Join(dir, "d.yaml")))
	}

	t.Run("refused by default", func(t *testing.T) {
		f := start(t, layout, func(c *dirsource.Config[*obj]) {
			c.Source.InitTimeout = time.Millisecond // the refused links never read
		})
		f.wait("a1=one@a.yaml a2=two@a.yaml c1=cm@c.yaml d1=abs@d.yaml")
		s := f.waitStatus("links reported", func(s source.StatusSnapshot) bool { return s.FailingCount == 2 })
		for _, e := range s.Failing {
			if (e.Key != "shadow.yaml" && e.Key != "out.yaml") || !strings.Contains(e.Error, dirsource.ErrOutsideDir.Error()) {
				t.Errorf("%s: %s", e.Key, e.Error)
			}
			if strings.Contains(e.Error, "Zm9vYmFy") {
				t.Errorf("%s: the file was read: %s", e.Key, e.Error)
			}
		}
	})

	t.Run("allowed", func(t *testing.T) {
		f := start(t, layout, func(c *dirsource.Config[*obj]) {
			c.AllowSymlinksOutside = true
			c.Source.InitTimeout = time.Millisecond
		})
		f.wait("a1=one@a.yaml a2=two@a.yaml c1=cm@c.yaml d1=abs@d.yaml o1=out@out.yaml")
		s := f.waitStatus("shadow reported", func(s source.StatusSnapshot) bool { return s.FailingCount == 1 })
		for _, e := range s.Failing {
			if e.Key != "shadow.yaml" || !strings.Contains(e.Error, "not found in type") || leaks(e.Error, shadowLine) {
				t.Errorf("%s: %s", e.Key, e.Error)
			}
		}
	})
}

// A decode in progress is abandoned at Stop: the hive stops at once
// although the decode never returns by itself (a manifest that takes
// minutes to decode did that before, and Stop failed after its
// deadline).
func TestStopAbandonsDecode(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	returned := make(chan struct{})
	f := start(t, func(dir string) { write(t, filepath.Join(dir, "a.yaml"), aYAML) }, func(c *dirsource.Config[*obj]) {
		c.Decode = func(name string, data []byte) ([]*obj, error) {
			if strings.Contains(string(data), "slow") {
				defer close(returned)
				close(entered)
				<-release
			}
			return decode(name, data)
		}
	})
	f.wait("a1=one@a.yaml a2=two@a.yaml")
	write(t, filepath.Join(f.dir, "slow.yaml"), "key: s\nvalue: slow\n")
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f.stop(ctx)
	if ctx.Err() != nil {
		t.Fatal("Stop waited for the decode")
	}
	// The abandoned decode ends on its own (goleak checks its
	// goroutine); its result is dropped.
	close(release)
	<-returned
	if got := f.contents(f.db.ReadTxn()); got != "a1=one@a.yaml a2=two@a.yaml" {
		t.Fatalf("table %q after Stop", got)
	}
}
