package netroute

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ChunkSize is the most route changes Conn sends in one sendmsg. The
// kernel handles a whole sendmsg before it returns, queueing an answer
// for each failed message; a chunk keeps the request under the socket's
// send buffer and the failures of even a wholly bad chunk within its
// receive buffer.
const ChunkSize = 512

// answerTimeout bounds the wait for the kernel's answers to one chunk.
// They are queued before sendmsg returns, so only a lost answer waits.
const answerTimeout = 10 * time.Second

// Conn is a netlink route socket in a namespace that applies many route
// changes per system call. netlink.Handle does one request and one
// acknowledgement per route, two system calls and a wait on the
// runtime's poller each; Conn writes a chunk of RTM_NEWROUTE or
// RTM_DELROUTE messages into one buffer with consecutive sequence
// numbers, sends it with one sendmsg, and asks for an acknowledgement on
// the last message only. The kernel answers every failed message anyway,
// with its sequence number, which maps the error back to its route; the
// last message's answer says the chunk is done.
//
// Conn encodes the fields a unicast route needs: Dst, Gw, LinkIndex,
// Table, Protocol, Scope, Priority, Tos and Type. Other fields of
// netlink.Route are ignored. A Conn serves one call at a time.
type Conn struct {
	mu   sync.Mutex
	fd   int
	seq  uint32
	sbuf []byte
	rbuf []byte

	lastDump int // routes in the last List, to size the next
}

// OpenConn opens a Conn in the namespace.
func (n *Namespace) OpenConn() (*Conn, error) {
	fd := -1
	err := n.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	c := &Conn{fd: fd, rbuf: make([]byte, 1<<16)}
	if err := c.setup(); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	return c, nil
}

func (c *Conn) setup() error {
	const bufSize = 4 << 20
	// The FORCE variants pass the system's limits (root only); the plain
	// ones are the fallback, capped by net.core.[rw]mem_max.
	if unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, bufSize) != nil {
		unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, bufSize)
	}
	if unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, bufSize) != nil {
		unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_SNDBUF, bufSize)
	}
	// Extended acks carry the kernel's reason ("Nexthop has invalid
	// gateway"); capped acks leave out the echo of our message.
	for _, opt := range []int{unix.NETLINK_EXT_ACK, unix.NETLINK_CAP_ACK} {
		if err := unix.SetsockoptInt(c.fd, unix.SOL_NETLINK, opt, 1); err != nil {
			return err
		}
	}
	tv := unix.NsecToTimeval(answerTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	return unix.Bind(c.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// Close closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return unix.Close(c.fd)
}

// Replace installs every route, replacing the route of the same
// destination, table, priority and TOS if there is one (ip route
// replace). errs[i] gets route i's error; errs must be as long as routes.
// Once ctx ends, the routes not yet sent fail with its error.
func (c *Conn) Replace(ctx context.Context, routes []*netlink.Route, errs []error) {
	c.apply(ctx, unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, routes, errs)
}

// Delete deletes every route (ip route del): the kernel route of the same
// destination, table, protocol, priority and TOS. A route that is not
// there fails with ESRCH. errs as for Replace.
func (c *Conn) Delete(ctx context.Context, routes []*netlink.Route, errs []error) {
	c.apply(ctx, unix.RTM_DELROUTE, 0, routes, errs)
}

func (c *Conn) apply(ctx context.Context, typ, flags uint16, routes []*netlink.Route, errs []error) {
	if len(errs) != len(routes) {
		panic("netroute: len(errs) != len(routes)")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for from := 0; from < len(routes); from += ChunkSize {
		to := min(from+ChunkSize, len(routes))
		if err := ctx.Err(); err != nil {
			fill(errs[from:], err)
			return
		}
		c.chunk(typ, flags, routes[from:to], errs[from:to])
	}
}

// chunk sends one chunk and collects the answers.
func (c *Conn) chunk(typ, flags uint16, routes []*netlink.Route, errs []error) {
	first := c.seq + 1
	c.sbuf = c.sbuf[:0]
	var last uint32
	sent := 0
	for i, r := range routes {
		// Every route has a sequence number, sent or not, so that an
		// answer's number minus first is its index.
		seq := first + uint32(i)
		f := flags
		if i == len(routes)-1 {
			f |= unix.NLM_F_ACK
		}
		var err error
		c.sbuf, err = appendRouteMsg(c.sbuf, typ, f, seq, r)
		if err != nil {
			errs[i] = err
			continue
		}
		errs[i] = nil
		last = seq
		sent++
	}
	c.seq = first + uint32(len(routes))
	if sent == 0 {
		return
	}
	if routes[last-first] != routes[len(routes)-1] {
		// The last route could not be encoded: ask for an ack on the
		// last one that was.
		markAck(c.sbuf, last)
	}
	if err := unix.Sendto(c.fd, c.sbuf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		fillNil(errs, fmt.Errorf("netlink send: %w", err))
		return
	}
	if err := c.collect(first, last, errs); err != nil {
		// Without the final ack there is no telling which changes took:
		// fail the rest, to be retried (replace and delete are both
		// safe to repeat), and drop whatever answers are still queued.
		fillNil(errs, fmt.Errorf("netlink: no answer from the kernel: %w", err))
		c.drain()
	}
}

// collect reads answers until the one for last, recording each error at
// its route's index.
func (c *Conn) collect(first, last uint32, errs []error) error {
	for {
		n, _, err := unix.Recvfrom(c.fd, c.rbuf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(c.rbuf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			i := m.Header.Seq - first // wraps for answers of earlier chunks
			if m.Header.Type != unix.NLMSG_ERROR || i >= uint32(len(errs)) || len(m.Data) < 4 {
				continue
			}
			if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
				errs[i] = ackError(m, syscall.Errno(-errno))
			}
			if m.Header.Seq == last {
				return nil
			}
		}
	}
}

// drain drops every queued answer.
func (c *Conn) drain() {
	for {
		if _, _, err := unix.Recvfrom(c.fd, c.rbuf, unix.MSG_DONTWAIT); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// ackError is the error of an answer, with the kernel's extended-ack
// message when there is one, as netlink.Handle reports it: the errno
// stays matchable with errors.Is.
func ackError(m syscall.NetlinkMessage, errno syscall.Errno) error {
	if m.Header.Flags&unix.NLM_F_ACK_TLVS == 0 {
		return errno
	}
	// After the errno: our message's header (capped), or all of it.
	data := m.Data[4:]
	if len(data) < unix.SizeofNlMsghdr {
		return errno
	}
	skip := unix.SizeofNlMsghdr
	if m.Header.Flags&unix.NLM_F_CAPPED == 0 {
		skip = int(binary.NativeEndian.Uint32(data))
	}
	if skip > len(data) {
		return errno
	}
	data = data[min(align(skip), len(data)):]
	for len(data) >= unix.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(data))
		t := binary.NativeEndian.Uint16(data[2:])
		if l < unix.SizeofRtAttr || l > len(data) {
			break
		}
		if t == unix.NLMSGERR_ATTR_MSG {
			return fmt.Errorf("%w: %s", errno, unix.ByteSliceToString(data[unix.SizeofRtAttr:l]))
		}
		data = data[min(align(l), len(data)):]
	}
	return errno
}

// appendRouteMsg appends one RTM_NEWROUTE or RTM_DELROUTE message for r.
func appendRouteMsg(b []byte, typ, flags uint16, seq uint32, r *netlink.Route) ([]byte, error) {
	if r.Dst == nil {
		return b, errors.New("netroute: route without a destination")
	}
	family, dst := byte(unix.AF_INET), r.Dst.IP.To4()
	if dst == nil {
		family, dst = unix.AF_INET6, r.Dst.IP.To16()
	}
	if dst == nil {
		return b, fmt.Errorf("netroute: bad destination %v", r.Dst.IP)
	}
	ones, _ := r.Dst.Mask.Size()
	table := uint32(r.Table)
	if table == 0 {
		table = unix.RT_TABLE_MAIN
	}
	rtmTable := byte(unix.RT_TABLE_UNSPEC) // then RTA_TABLE says which
	if table < 256 {
		rtmTable = byte(table)
	}
	scope, rtype := byte(r.Scope), byte(r.Type)
	if typ == unix.RTM_DELROUTE {
		// Match any scope and type, as ip route del does.
		scope = unix.RT_SCOPE_NOWHERE
	} else if rtype == 0 {
		rtype = unix.RTN_UNICAST
	}

	start := len(b)
	b = append(b, make([]byte, unix.SizeofNlMsghdr)...)
	b = append(b, family, byte(ones), 0, byte(r.Tos), rtmTable, byte(r.Protocol), scope, rtype, 0, 0, 0, 0)
	b = appendAttr(b, unix.RTA_DST, dst)
	b = appendAttr(b, unix.RTA_TABLE, binary.NativeEndian.AppendUint32(nil, table))
	if r.Priority != 0 {
		b = appendAttr(b, unix.RTA_PRIORITY, binary.NativeEndian.AppendUint32(nil, uint32(r.Priority)))
	}
	if typ == unix.RTM_NEWROUTE {
		if r.Gw != nil {
			gw := r.Gw.To4()
			if family == unix.AF_INET6 || gw == nil {
				gw = r.Gw.To16()
			}
			if len(gw) != len(dst) {
				return b[:start], fmt.Errorf("netroute: gateway %v is not of the family of %v", r.Gw, r.Dst)
			}
			b = appendAttr(b, unix.RTA_GATEWAY, gw)
		}
		if r.LinkIndex != 0 {
			b = appendAttr(b, unix.RTA_OIF, binary.NativeEndian.AppendUint32(nil, uint32(r.LinkIndex)))
		}
	}
	h := b[start:]
	binary.NativeEndian.PutUint32(h[0:], uint32(len(h)))
	binary.NativeEndian.PutUint16(h[4:], typ)
	binary.NativeEndian.PutUint16(h[6:], unix.NLM_F_REQUEST|flags)
	binary.NativeEndian.PutUint32(h[8:], seq)
	return b, nil
}

// markAck sets NLM_F_ACK on the message with sequence number seq in b.
func markAck(b []byte, seq uint32) {
	for len(b) >= unix.SizeofNlMsghdr {
		l := binary.NativeEndian.Uint32(b)
		if binary.NativeEndian.Uint32(b[8:]) == seq {
			binary.NativeEndian.PutUint16(b[6:], binary.NativeEndian.Uint16(b[6:])|unix.NLM_F_ACK)
			return
		}
		b = b[align(int(l)):]
	}
}

func appendAttr(b []byte, typ uint16, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	b = binary.NativeEndian.AppendUint16(b, uint16(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for range align(l) - l {
		b = append(b, 0)
	}
	return b
}

// align rounds a netlink length up to a multiple of 4.
func align(n int) int { return (n + 3) &^ 3 }

func fill(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}

// fillNil sets err where no error is recorded yet.
func fillNil(errs []error, err error) {
	for i := range errs {
		if errs[i] == nil {
			errs[i] = err
		}
	}
}
