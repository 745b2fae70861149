package dirsource

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// DecodeYAML decodes every document of a YAML stream (JSON is YAML) into
// a T each; empty documents are skipped. Errors carry the line, as
// "yaml: line 3: ...", and say which document failed. Use it in
// Config.Decode, followed by checks of your own.
func DecodeYAML[T any](data []byte) ([]T, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []T
	for i := 1; ; i++ {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(node.Content) == 0 || (node.Content[0].Kind == yaml.ScalarNode && node.Content[0].Tag == "!!null") {
			continue
		}
		var v T
		if err := node.Decode(&v); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, v)
	}
}
