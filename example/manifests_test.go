package main

import (
	"strings"
	"testing"

	"github.com/converge-go/converge/source"
)

// Finding 3: a manifest's errors, which /healthz serves to anyone who can
// connect, quote no more than a short prefix of what the manifest holds:
// a manifest may be a link to a file only root can read.
func TestManifestErrorsQuoteShortPrefixes(t *testing.T) {
	secret := "root:$6$Hx1rOq2JfQYz0t4j$Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Lw0123456789:19000:0:99999:7:::"
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
