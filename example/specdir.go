package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// specDir is the directory the API's desired files are saved in, one
// small JSON file each (NAME.json, a FileSpec): a PUT or a DELETE writes
// or removes one file, never the whole set. The desired-state file
// (desiredFile) names it and records the state directory they are for.
type specDir string

// defaultSpecDir is the directory of the desired-state file at path: the
// same name with ".d" added, beside it.
func defaultSpecDir(path string) string { return path + ".d" }

func (d specDir) file(name string) string { return filepath.Join(string(d), name+".json") }

// write saves spec, atomically: a crash leaves the old spec or the new.
func (d specDir) write(spec FileSpec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return err
	}
	if err := writeFileAtomic(d.file(spec.Name), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save desired file %s: %w", spec.Name, err)
	}
	return nil
}

// remove removes the spec of name, durably.
func (d specDir) remove(name string) error {
	if err := removeFile(d.file(name)); err != nil {
		return fmt.Errorf("remove desired file %s: %w", name, err)
	}
	return nil
}

// read returns every saved spec, validated. A spec that does not parse,
// is invalid or is saved under another name is an error: better to refuse
// to start than to prune a file because of it. Temporary files left by a
// crash are removed.
func (d specDir) read() ([]FileSpec, error) {
	entries, err := os.ReadDir(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var specs []FileSpec
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, tempPrefix):
			os.Remove(filepath.Join(string(d), name))
			continue
		case !e.Type().IsRegular() || !strings.HasSuffix(name, ".json"):
			return nil, fmt.Errorf("desired files %s: %s is not a saved desired file: remove it", d, name)
		}
		spec, err := readSpec(filepath.Join(string(d), name))
		if err == nil && spec.Name+".json" != name {
			err = fmt.Errorf("holds the desired file %q", spec.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("desired files %s: %s: %w", d, name, err)
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

func readSpec(path string) (FileSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return FileSpec{}, err
	}
	var spec FileSpec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return FileSpec{}, err
	}
	return spec, spec.validate()
}
