package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-go/converge/source"
)

// secretLine stands for a line of a file only root may read.
const secretLine = "root:$6$Hx1rOq2JfQYz0t4j$Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Lw0123456789:19000:0:99999:7:::"

// Finding 3: a manifest's errors, which /healthz serves to anyone who can
// connect, quote no more than a short prefix of what the manifest holds:
// a manifest may be a link to a file only root can read.
func TestManifestErrorsQuoteShortPrefixes(t *testing.T) {
	secret := secretLine
	for _, data := range []string{
		"name: \"" + secret + "\"\ncontent: x\n",
		"name: a.txt\ncontent: x\nmode: \"" + secret + "\"\n",
		"name: a.txt\n" + secret + ": x\n",
		"\"" + secret + "\"\n",
	} {
		_, err := decodeManifest("m.yaml", []byte(data))
		if err == nil {
			t.Fatalf("%q: no error", data)
		}
		for i := 0; i+source.MaxQuoted < len(secret); i++ {
			if strings.Contains(err.Error(), secret[i:i+source.MaxQuoted+1]) {
				t.Fatalf("%q: error %q quotes more than %d bytes of it", data, err, source.MaxQuoted)
			}
		}
	}
}

// Finding 3, end to end: /healthz, which anyone who can connect may read,
// shows neither a file outside the manifests directory that a symlink
// points at (it is not read) nor more than a short prefix of a manifest
// whose keys are secrets (strict decoding named an unknown key whole).
func TestHealthzShowsNoFileContents(t *testing.T) {
	root := t.TempDir()
	manifests := filepath.Join(root, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	shadow := filepath.Join(root, "shadow")
	if err := os.WriteFile(shadow, []byte("name: a.txt\n"+secretLine+": x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shadow, filepath.Join(manifests, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	putManifest(t, manifests, "inside.yaml", "name: b.txt\n"+secretLine+": x\n")
	a, reg := startWithManifests(t, root, manifests)
	eventually(t, "both reported", func() error {
		if err := unhealthy(reg, "link.yaml", "outside the directory"); err != nil {
			return err
		}
		return unhealthy(reg, "inside.yaml", "not found in type")
	})
	body := a.Expect(t, "GET", "/healthz", "", http.StatusServiceUnavailable, "inside.yaml")
	for i := 0; i+source.MaxQuoted < len(secretLine); i++ {
		if strings.Contains(body, secretLine[i:i+source.MaxQuoted+1]) {
			t.Fatalf("/healthz quotes more than %d bytes of a manifest:\n%s", source.MaxQuoted, body)
		}
	}
}
