package apiservertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ReadCRDs decodes the CustomResourceDefinitions of YAML (or JSON)
// data: one or more documents separated by "---". Unknown fields are an
// error, as kubectl apply --validate=strict makes them; so is a document
// of another kind.
func ReadCRDs(data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return crds, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(doc, &crd); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if crd.Kind == "" && crd.Name == "" {
			continue // only comments
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("document %d is a %q, not a CustomResourceDefinition", i, crd.Kind)
		}
		crds = append(crds, &crd)
	}
}

// InstallCRDFiles installs the CustomResourceDefinitions of YAML files
// (ReadCRDs), as kubectl apply -f would, and waits until each is
// Established.
func (s *Server) InstallCRDFiles(ctx context.Context, paths ...string) error {
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		crds, err := ReadCRDs(data)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, crd := range crds {
			if err := s.InstallCRD(ctx, crd); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	return nil
}
