package watch

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/converge-go/converge/etcd/internal/etcdcluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdcluster.LeakOptions()...) }

// silencer makes the first watch stream a client opens go silent after
// after messages (0: before the watch is even created): nothing more it
// receives is delivered, as on a member that hangs without closing its
// connection, and progress requests go unanswered.
type silencer struct {
	after   int
	streams atomic.Int32
}

func (s *silencer) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Watch/Watch" || s.streams.Add(1) != 1 {
		return cs, err
	}
	return &silentStream{ClientStream: cs, left: s.after}, nil
}

type silentStream struct {
	grpc.ClientStream
	left int
}

func (s *silentStream) RecvMsg(m any) error {
	if s.left > 0 {
		s.left--
		return s.ClientStream.RecvMsg(m)
	}
	<-s.Context().Done()
	return s.Context().Err()
}

// A watch whose stream goes silent, before the member created the watch
// or after, opens a new stream within two silences (after a progress
// request went unanswered); the events come in order, each once, from the
// revision asked for on.
func TestSilentStreamIsReplaced(t *testing.T) {
	for _, after := range []int{0, 1} {
		t.Run(fmt.Sprintf("after-%d-messages", after), func(t *testing.T) { silentStreamIsReplaced(t, after) })
	}
}

func silentStreamIsReplaced(t *testing.T, after int) {
	c := etcdcluster.Start(t, 1)
	plain := c.Client(t)
	sil := &silencer{after: after}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(sil.stream)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	first, err := plain.Put(ctx, "/k/0", "0")
	if err != nil {
		t.Fatal(err)
	}
	const silence = 100 * time.Millisecond
	w := New(ctx, cli, "/k/", first.Header.Revision, silence, clientv3.WithPrefix())
	defer w.Stop()
	start := time.Now()
	for i := 1; i <= 3; i++ {
		if _, err := plain.Put(ctx, fmt.Sprintf("/k/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < 4 {
		select {
		case r := <-w.C():
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			for _, ev := range r.Events {
				got = append(got, string(ev.Kv.Key))
			}
		case <-timeout:
			t.Fatalf("after 10s the watch delivered %v", got)
		}
	}
	took := time.Since(start)
	if want := []string{"/k/0", "/k/1", "/k/2", "/k/3"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if sil.streams.Load() < 2 {
		t.Fatal("the silent stream was never replaced")
	}
	if took > 2*silence+time.Second {
		t.Fatalf("events delivered %v after a silent stream, want within 2 silences and a second", took)
	}
	t.Logf("delivered %v after the first stream went silent", took)
}
