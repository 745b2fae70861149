package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/converge-go/converge/k8s/internal/apiservertest"
)

var srv *apiservertest.Server

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if srv, err = apiservertest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	srv.Close()
	if code != 0 {
		return code
	}
	if err := apiservertest.FindLeaks(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
