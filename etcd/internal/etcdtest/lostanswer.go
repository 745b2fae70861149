package etcdtest

import (
	"context"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// LostAnswer is a gRPC client interceptor that lets the first Txn Match
// picks through to etcd and then loses its answer, as a member killed or
// a connection reset after the request was applied does: etcd applied
// the Txn, the caller gets an error. Later Txns pass untouched. clientv3
// does not retry a Txn, so the caller sees exactly that error.
//
// Give a client DialOption() and run the operation under test; Lost tells
// whether the answer was lost, and what etcd had answered.
type LostAnswer struct {
	// Match picks the Txn whose answer is lost; it sees only Txns that
	// etcd answered without an error.
	Match func(*pb.TxnRequest) bool
	// Answer, if set, is the error the caller gets, made from the call's
	// context (a test may cancel it first); nil: Unavailable.
	Answer func(ctx context.Context) error

	mu   sync.Mutex
	lost *LostTxn
}

// LostTxn is the Txn whose answer was lost: what was asked, what etcd
// answered, and when.
type LostTxn struct {
	Request  *pb.TxnRequest
	Response *pb.TxnResponse
	At       time.Time
}

// DialOption installs the interceptor on a client (clientv3.Config's
// DialOptions).
func (l *LostAnswer) DialOption() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(l.intercept)
}

func (l *LostAnswer) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	txn, ok := req.(*pb.TxnRequest)
	if !ok || err != nil || !l.Match(txn) {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return nil
	}
	resp, _ := reply.(*pb.TxnResponse)
	l.lost = &LostTxn{Request: txn, Response: resp, At: time.Now()}
	if l.Answer != nil {
		return l.Answer(ctx)
	}
	return status.Error(codes.Unavailable, "answer lost by the test")
}

// Lost returns the Txn whose answer was lost; ok is false until one was.
func (l *LostAnswer) Lost() (txn LostTxn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		return LostTxn{}, false
	}
	return *l.lost, true
}
