package main

import (
	"os"
	"testing"

	"github.com/converge-go/converge/k8s/apiservertest"
)

// One API server serves every test of the package.
var srv *apiservertest.Server

func TestMain(m *testing.M) { os.Exit(apiservertest.RunTests(m, &srv)) }
