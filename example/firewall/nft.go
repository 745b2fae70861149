package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// nftRunner runs nft with a script on its standard input and returns what
// it printed. An error carries nft's messages (its standard error), which
// name the lines they are about.
type nftRunner interface {
	Run(ctx context.Context, stdin string, args ...string) (string, error)
}

// nftCmd runs the nft binary in a network namespace.
type nftCmd struct {
	path string
	ns   *netns
}

var _ nftRunner = (*nftCmd)(nil)

// nftError is the error of an nft that ran and failed, as opposed to one
// that could not be started.
type nftError struct {
	args   []string
	stderr string // nft's messages, with the lines they are about
}

func (e *nftError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if strings.Contains(msg, "Operation not permitted") {
		msg += " (nft needs CAP_NET_ADMIN in the network namespace: run as root)"
	}
	return fmt.Sprintf("nft %s: %s", strings.Join(e.args, " "), msg)
}

// Run implements nftRunner.
func (c *nftCmd) Run(ctx context.Context, stdin string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	err := c.ns.do(func() error {
		cmd := exec.CommandContext(ctx, c.path, args...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		// LANG=C: messages in English, for the line numbers to be found.
		cmd.Env = []string{"LANG=C", "LC_ALL=C"}
		return cmd.Run()
	})
	if err == nil {
		return stdout.String(), nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || ctx.Err() != nil {
		return "", fmt.Errorf("nft %s: %w", strings.Join(args, " "), err)
	}
	return "", &nftError{args: args, stderr: stderr.String()}
}

// findNft returns the path of the nft binary: name if it holds a slash,
// else name looked up in PATH and then in /usr/sbin and /sbin (which a
// user's PATH often lacks). It says how to install nft when there is none.
func findNft(name string) (string, error) {
	if strings.ContainsRune(name, '/') {
		if _, err := os.Stat(name); err != nil {
			return "", fmt.Errorf("nft: %w", err)
		}
		return name, nil
	}
	if path, err := exec.LookPath(name); err == nil {
		return path, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH, /usr/sbin or /sbin: install nftables "+
		"(Debian: apt-get install nftables) or give its path with --nft", name)
}
