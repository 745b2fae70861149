package hostcheck

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A name other than localhost is refused (421, saying why); IP addresses
// and localhost are served.
func TestHandlerRefusesRebindableHosts(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for host, want := range map[string]int{
		"attacker.example:8080":  http.StatusMisdirectedRequest,
		"attacker.example":       http.StatusMisdirectedRequest,
		"localhost.attacker.com": http.StatusMisdirectedRequest,
		"127.0.0.1:8080":         http.StatusTeapot,
		"localhost:8080":         http.StatusTeapot,
		"LOCALHOST.":             http.StatusTeapot,
		"app.localhost:8080":     http.StatusTeapot,
		"[::1]:8080":             http.StatusTeapot,
		"192.0.2.1":              http.StatusTeapot,
		"":                       http.StatusTeapot,
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		Handler(ok).ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, want)
		}
		if want == http.StatusMisdirectedRequest && !strings.Contains(rec.Body.String(), "address the API by IP address") {
			t.Errorf("Host %q: body %q", host, rec.Body)
		}
	}
}
