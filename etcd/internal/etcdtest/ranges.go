package etcdtest

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// Ranges is a gRPC client interceptor that records what every range read
// returned (Range calls, and the ranges inside Txns), and how many reads
// (Range or Txn) the client had in flight at once at most: tests of
// paging and of limits on reads.
type Ranges struct {
	mu          sync.Mutex
	answers     []RangeAnswer
	inFlight    int
	maxInFlight int
}

// RangeAnswer is one range etcd answered: how many keys, and how many
// bytes of keys and values.
type RangeAnswer struct {
	Keys  int
	Bytes int
}

// DialOption installs the interceptor on a client (clientv3.Config's
// DialOptions).
func (r *Ranges) DialOption() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(r.intercept)
}

func (r *Ranges) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	_, isRange := req.(*pb.RangeRequest)
	_, isTxn := req.(*pb.TxnRequest)
	if isRange || isTxn {
		r.mu.Lock()
		r.inFlight++
		r.maxInFlight = max(r.maxInFlight, r.inFlight)
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.inFlight--
			r.mu.Unlock()
		}()
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		return err
	}
	var ranges []*pb.RangeResponse
	switch resp := reply.(type) {
	case *pb.RangeResponse:
		ranges = append(ranges, resp)
	case *pb.TxnResponse:
		for _, op := range resp.Responses {
			if rr := op.GetResponseRange(); rr != nil {
				ranges = append(ranges, rr)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rr := range ranges {
		a := RangeAnswer{Keys: len(rr.Kvs)}
		for _, kv := range rr.Kvs {
			a.Bytes += len(kv.Key) + len(kv.Value)
		}
		r.answers = append(r.answers, a)
	}
	return nil
}

// Answers returns the ranges answered so far, in order.
func (r *Ranges) Answers() []RangeAnswer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RangeAnswer(nil), r.answers...)
}

// MaxInFlight returns the most reads the client had in flight at once.
func (r *Ranges) MaxInFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxInFlight
}

// Reset forgets what was recorded.
func (r *Ranges) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers, r.maxInFlight = nil, r.inFlight
}
