package waitorder

import "github.com/converge-go/converge/reconciler"

// applyOrder sets the Config's ordering options from o; o's nil functions
// leave the options off.
func applyOrder(cfg *reconciler.Config[*convergeObject], o Order) {
	if o.Priority != nil {
		cfg.Priority = func(obj *convergeObject) int { return o.Priority(obj.ID) }
	}
	if o.FairnessKey != nil {
		cfg.FairnessKey = func(obj *convergeObject) string { return o.FairnessKey(obj.ID) }
	}
	if o.TargetKey != nil {
		cfg.TargetKey = func(obj *convergeObject) string { return o.TargetKey(obj.ID) }
		cfg.TargetConcurrency = o.TargetConcurrency
	}
}
