package waitorder

import (
	"errors"

	"github.com/converge-go/converge/reconciler"
)

// applyOrder sets the Config's ordering options from o.
func applyOrder(_ *reconciler.Config[*convergeObject], o Order) error {
	if !o.IsZero() {
		return errors.New("waitorder: this engine has no ordering options yet")
	}
	return nil
}
