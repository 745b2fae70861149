package lease

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/converge-go/converge/etcd/internal/etcdcluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdcluster.LeakOptions()...) }
