package k8ssource

import (
	"errors"
	"fmt"

	"github.com/converge-go/converge/source"
)

var (
	// ErrNoStatusSubresource is wrapped by the status writer's health
	// error when its resource has no status subresource: it writes
	// nothing until the CRD has one.
	ErrNoStatusSubresource = errors.New("no status subresource")

	// ErrConditionsNotMapList is wrapped by the status writer's health
	// error when the resource's status.conditions is not a map list keyed
	// by type: every write would replace the conditions of the other
	// field managers, so it writes nothing until the CRD declares it one.
	ErrConditionsNotMapList = errors.New("status.conditions is not a map list keyed by type")

	// errTableRequired: the status writer follows the source's table.
	errTableRequired = fmt.Errorf("%w: Source.Table is required", source.ErrInvalidConfig)
	// errEqualRequired: the status writer tells its own rows by it.
	errEqualRequired = fmt.Errorf("%w: Source.Equal is required", source.ErrInvalidConfig)
)
