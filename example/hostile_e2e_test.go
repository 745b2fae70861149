package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-go/converge/source/dirsource"
)

// Issue 52 item 5: the API, which has no authentication, never shows a
// file's content: not of a 0600 manifest in a directory only the agent
// can read, nor of a file another caller PUT. GET shows its size.
func TestGetShowsNoContent(t *testing.T) {
	root := t.TempDir()
	manifests := filepath.Join(root, "manifests")
	if err := os.Mkdir(manifests, 0o700); err != nil {
		t.Fatal(err)
	}
	const secret, apiSecret = "root-only-secret-0600", "api-secret"
	if err := os.WriteFile(filepath.Join(manifests, "m.yaml"), []byte("name: s.txt\ncontent: "+secret+"\nmode: \"0600\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ := startWithManifests(t, root, manifests)
	a.Expect(t, "PUT", "/files/a.txt", `{"content": "`+apiSecret+`"}`, http.StatusCreated, "")
	eventually(t, "both written", func() error {
		return a.dirMismatch(map[string]want{"s.txt": {secret, 0o600}, "a.txt": {apiSecret, 0o644}})
	})
	for _, path := range []string{"/files", "/files/s.txt", "/files/a.txt"} {
		body := a.Expect(t, "GET", path, "", http.StatusOK, `"size": `)
		if strings.Contains(body, secret) || strings.Contains(body, apiSecret) || strings.Contains(body, `"content"`) {
			t.Errorf("GET %s shows content: %s", path, body)
		}
	}
	a.Expect(t, "GET", "/files/s.txt", "", http.StatusOK, `"size": 21`)
}

// Issue 52 item 1, on the agent: a manifest of 2,000 repeated keys and
// one of 40,000 keys are refused at once, health says why in a short
// message, and an honest manifest is applied meanwhile (it waited 21 s
// behind a 24 KB one).
func TestHostileManifestsStallNothing(t *testing.T) {
	root := t.TempDir()
	manifests := filepath.Join(root, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	putManifest(t, manifests, "a-repeated.yaml", strings.Repeat("name: x\n", 2000))
	var many strings.Builder
	for i := range 40000 {
		fmt.Fprintf(&many, "k%07d: 1\n", i)
	}
	putManifest(t, manifests, "b-many.yaml", many.String())
	a, reg := startWithManifests(t, root, manifests)
	putManifest(t, manifests, "c-honest.yaml", "name: honest.txt\ncontent: ok\n")
	eventually(t, "the honest manifest applied", func() error {
		return a.dirMismatch(map[string]want{"honest.txt": {"ok", 0o644}})
	})
	eventually(t, "repeated keys reported", func() error { return unhealthy(reg, "a-repeated.yaml", "already defined at line 1") })
	eventually(t, "many keys reported", func() error { return unhealthy(reg, "b-many.yaml", dirsource.ErrTooComplex.Error()) })
	body := a.Expect(t, "GET", "/healthz", "", http.StatusServiceUnavailable, "a-repeated.yaml")
	if len(body) > 4096 {
		t.Fatalf("/healthz says %d bytes", len(body))
	}
}
