package agentkit

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// checkPeer refuses a connection from a user other than the agent's (or
// root): the socket's mode already keeps them out, unless someone
// loosened it.
func checkPeer(conn *net.UnixConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("peer credentials: %w", credErr)
	}
	if euid := os.Geteuid(); int(cred.Uid) != euid && cred.Uid != 0 {
		return fmt.Errorf("refused: uid %d (pid %d) is not the agent's user (uid %d)", cred.Uid, cred.Pid, euid)
	}
	return nil
}
