package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-go/converge/etcd/etcdsource"
	"github.com/converge-go/converge/internal/lineartest"
)

// Issue 52 item 7: the fleet's HTTP server has the Host rule of the other
// examples: a name other than localhost (a page whose DNS name was
// rebound to this address) gets 421; addresses and localhost are served.
func TestFleetServerRefusesRebindableHosts(t *testing.T) {
	h := apiHandler(nil, options{prefix: "/fleet"}, &reporter{})
	for host, want := range map[string]int{
		"attacker.example:8080": http.StatusMisdirectedRequest,
		"attacker.example":      http.StatusMisdirectedRequest,
		"127.0.0.1:8080":        http.StatusServiceUnavailable, // served: "not started"
		"localhost:8080":        http.StatusServiceUnavailable,
	} {
		req := httptest.NewRequest("GET", "/status", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s: %d %s, want %d", host, rec.Code, rec.Body, want)
		}
	}
}

// Issue 52 item 7: a user's password is not sent over plain HTTP unless
// --insecure-credentials says so; https:// and unix sockets carry it.
func TestCredentialsRefusedOverPlainHTTP(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string // "" for no error
	}{
		{"http", []string{"--endpoints", "http://etcd:2379", "--user", "fleet", "--password-file", pw}, nil, "in clear"},
		{"no scheme", []string{"--endpoints", "etcd:2379", "--user", "fleet", "--password-file", pw}, nil, "in clear"},
		{"one of several", []string{"--endpoints", "https://a:2379,http://b:2379", "--user", "fleet", "--password-file", pw}, nil, "http://b:2379"},
		{"environment", nil, map[string]string{"ETCDCTL_ENDPOINTS": "http://etcd:2379", "ETCDCTL_USER": "fleet", "ETCDCTL_PASSWORD": "secret"}, "in clear"},
		{"http, insecure-credentials", []string{"--endpoints", "http://etcd:2379", "--user", "fleet", "--password-file", pw, "--insecure-credentials"}, nil, ""},
		{"https", []string{"--endpoints", "https://etcd:2379", "--user", "fleet", "--password-file", pw}, nil, ""},
		{"unix", []string{"--endpoints", "unix:///run/etcd.sock", "--user", "fleet", "--password-file", pw}, nil, ""},
		{"http without a user", []string{"--endpoints", "http://etcd:2379"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
			var o options
			c := commonFlags(fs, &o)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := c.config(env(tc.env))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			case tc.want == "" && len(tc.args) > 2 && cfg.Password != "secret":
				t.Fatalf("password %q", cfg.Password)
			}
		})
	}
}

// FuzzDecodeGroup: any etcd key and value decode into one valid group or
// fail, without panicking.
func FuzzDecodeGroup(f *testing.F) {
	for _, s := range [][2]string{{"web", `{"size": 2, "image": "web:1"}`}, {"a/b", `{}`}, {"", `{"size": -1}`},
		{"x", `{"size": 1, "size": 2}`}, {"y", `{"image": "\ud800"}`}, {"z", `[`}} {
		f.Add(s[0], []byte(s[1]))
	}
	decode := decodeGroup("/fleet/desired/")
	f.Fuzz(func(t *testing.T, name string, value []byte) {
		groups, err := decode(etcdsource.KeyValue{Key: "/fleet/desired/" + name, Value: value})
		if err != nil {
			return
		}
		if len(groups) != 1 || groups[0].Name != name || name == "" || strings.Contains(name, "/") || groups[0].Spec.Size < 0 {
			t.Fatalf("%q %q: %+v", name, value, groups)
		}
	})
}

// Decoding an etcd value takes time linear in it, whatever it holds (a
// key repeated many times, many unknown keys): four times the value
// (doubled twice) costs about the same per byte: under 2×, where
// quadratic work gives 4×.
func TestDecodeGroupIsLinear(t *testing.T) {
	decode := decodeGroup("/fleet/desired/")
	for name, gen := range map[string]func(int) []byte{
		"repeated key": func(n int) []byte { return []byte("{" + strings.Repeat(`"size": 1, `, n/11) + `"image": "x"}`) },
		"unknown keys": func(n int) []byte {
			var b strings.Builder
			b.WriteString("{")
			for i := 0; b.Len() < n; i++ {
				fmt.Fprintf(&b, `"k%07d": 1, `, i)
			}
			return []byte(b.String() + `"size": 1}`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			lineartest.Check(t, 512<<10, gen, func(v []byte) {
				_, _ = decode(etcdsource.KeyValue{Key: "/fleet/desired/g", Value: v})
			})
		})
	}
}
