package etcdsource

import (
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/source"
)

// Config describes an etcd source.
type Config[Obj comparable] struct {
	// Client is the etcd client; the source does not close it. Required.
	Client *clientv3.Client

	// Prefix selects the keys. "" means every key.
	Prefix string

	// Decode turns one key's value into its objects; its error is
	// reported on the key, which keeps the objects it had. Required.
	Decode func(kv KeyValue) ([]Obj, error)

	// PageSize: see DefaultPageSize.
	PageSize int64

	// PageBytes: see DefaultPageBytes and ListerWatcher.PageBytes.
	PageBytes int64

	// Source is the rest of the source's configuration: Name, Table,
	// Equal, Pending, Owns, buffer, resync and metrics. ListerWatcher and
	// Transform are set by New. Resync stays off by default: etcd's watch
	// is reliable, and a compaction is detected and relisted.
	// Source.StaleAfter defaults to DefaultStaleAfter (source.Off turns
	// it off). A value that fails to decode at the first list keeps the
	// table uninitialized (see source.Config.InitTimeout).
	Source source.Config[KeyValue, Obj]
}

// Register builds an etcd source and adds it to the hive module of p; see
// New.
func Register[Obj comparable](cfg Config[Obj], p source.Params) error {
	_, err := New(cfg, p)
	return err
}

// New registers an etcd source. Its errors wrap source.ErrInvalidConfig.
func New[Obj comparable](cfg Config[Obj], p source.Params) (source.Source, error) {
	switch {
	case cfg.Client == nil:
		return nil, fmt.Errorf("%w: Client is required", source.ErrInvalidConfig)
	case cfg.Decode == nil:
		return nil, fmt.Errorf("%w: Decode is required", source.ErrInvalidConfig)
	}
	sc := cfg.Source
	if sc.StaleAfter == 0 {
		sc.StaleAfter = DefaultStaleAfter
	}
	lw := NewListerWatcher(cfg.Client, cfg.Prefix, cfg.PageSize)
	lw.PageBytes = cfg.PageBytes
	if sc.StaleAfter > 0 {
		lw.ProgressEvery = sc.StaleAfter / 3
	}
	sc.ListerWatcher = lw
	decode := cfg.Decode
	sc.Transform = func(_ string, kv KeyValue) ([]Obj, error) { return decode(kv) }
	return source.New(sc, p)
}
