package main

import (
	"errors"
	"strings"
	"testing"
)

// TestDirManifests: a manifest's directory gets DefaultDirMode unless it
// gives one; kinds other than "dir", nested directories, directories with
// content, modes that keep the owner out, and a dir that is not a name
// are refused, each with what is wrong.
func TestDirManifests(t *testing.T) {
	files, err := decodeManifest("m.yaml", []byte("name: d\nkind: dir\n---\nname: f\ndir: d\ncontent: x\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := files[0]; !d.isDir() || d.Mode != DefaultDirMode {
		t.Fatalf("directory %+v: want kind dir, mode %s", d.FileSpec, DefaultDirMode)
	}
	if f := files[1]; f.isDir() || f.Dir != "d" || f.Mode != DefaultMode || f.path("/s") != "/s/d/f" {
		t.Fatalf("file %+v", f.FileSpec)
	}
	for manifest, want := range map[string]string{
		"name: d\nkind: folder\n":              "kind",
		"name: d\nkind: dir\ndir: e\n":         "not nested",
		"name: d\nkind: dir\ncontent: x\n":     "has content",
		"name: d\nkind: dir\nmode: \"0644\"\n": "rwx",
		"name: f\ndir: ../etc\n":               "dir",
		"name: f\ndir: f\n":                    "in itself",
	} {
		_, err := decodeManifest("m.yaml", []byte(manifest))
		if !errors.Is(err, errInvalidFile) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an invalid file saying %q", manifest, err, want)
		}
	}
}
