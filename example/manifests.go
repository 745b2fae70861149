package main

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/dirsource"
)

// manifestsOrigin is File.Origin of the files the manifests directory
// desires.
const manifestsOrigin = "manifests"

// errNotAPIFile is returned by the API for a file it does not own: one
// that a manifest in --desired-dir desires. The API answers 409.
var errNotAPIFile = errors.New("not the API's file")

// manifestsConfig is the --desired-dir flag.
type manifestsConfig struct {
	DesiredDir string
}

// Flags implements cell.Flagger.
func (def manifestsConfig) Flags(flags *pflag.FlagSet) {
	flags.String("desired-dir", def.DesiredDir,
		"Directory of YAML or JSON manifests of desired files ({name, content, mode, dir}) and directories ({name, kind: dir, mode}), several per file with ---, "+
			"desired together with the API's files; empty for none")
}

// manifestsCell adds the directory source when --desired-dir is given.
// The table then has two writers: the API's desired state (Origin "") and
// this source (Origin "manifests"). Each deletes only its own rows, so
// neither prunes the other's, and each refuses to overwrite the other's:
// a manifest naming an API file is reported in health, and the API
// answers 409 for a manifest's file. The table is initialized, and the
// reconciler prunes, only once both have loaded.
var manifestsCell = cell.Group(
	cell.Config(manifestsConfig{}),
	cell.Invoke(registerManifests),
)

func registerManifests(cfg manifestsConfig, app Config, p source.Params, files statedb.RWTable[*File]) error {
	if cfg.DesiredDir == "" {
		return nil
	}
	dir, err := filepath.Abs(cfg.DesiredDir)
	if err != nil {
		return err
	}
	if state, err := filepath.Abs(app.StateDir); err == nil && state == dir {
		return fmt.Errorf("--desired-dir %s must not be --state-dir: the agent writes there", cfg.DesiredDir)
	}
	return dirsource.Register(dirsource.Config[*File]{
		Dir:    cfg.DesiredDir,
		Decode: decodeManifest,
		Source: source.Config[dirsource.File, *File]{
			Name:    manifestsOrigin,
			Table:   files,
			Equal:   func(a, b *File) bool { return a.FileSpec == b.FileSpec && a.Origin == b.Origin },
			Pending: func(f *File) *File { f.Status = reconciler.StatusPending(); return f },
			Owns:    func(f *File) bool { return f.Origin == manifestsOrigin },
		},
	}, p)
}

// decodeManifest reads one manifest file: YAML or JSON documents of
// FileSpecs, each validated as the API validates a PUT.
func decodeManifest(_ string, data []byte) ([]*File, error) {
	specs, err := dirsource.DecodeYAML[manifestSpec](data)
	if err != nil {
		return nil, err
	}
	files := make([]*File, 0, len(specs))
	for i, m := range specs {
		spec := FileSpec{Name: m.Name, Content: m.Content, Mode: DefaultMode, Kind: m.Kind, Dir: m.Dir}
		if spec.isDir() {
			spec.Mode = DefaultDirMode
		}
		if m.Mode != "" {
			if err := spec.Mode.UnmarshalText([]byte(m.Mode)); err != nil {
				return nil, fmt.Errorf("document %d: %w", i+1, err)
			}
		}
		if err := spec.validate(); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		files = append(files, &File{FileSpec: spec, Origin: manifestsOrigin})
	}
	return files, nil
}

// manifestSpec is a FileSpec as a manifest spells it.
type manifestSpec struct {
	Name    string `yaml:"name"`
	Content string `yaml:"content"`
	Mode    string `yaml:"mode"`
	Kind    string `yaml:"kind"` // "dir" for a directory
	Dir     string `yaml:"dir"`  // the directory object a file is in
}

// errorStatus is the HTTP status of an error of the desired state.
func errorStatus(err error) int {
	switch {
	case errors.Is(err, errNotAPIFile):
		return http.StatusConflict
	case errors.Is(err, errLimit):
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}
