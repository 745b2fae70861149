package main

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/converge-go/converge/example/internal/agentkit"
)

// routeAPI serves the desired routes over HTTP:
//
//	GET    /routes             every desired route with its status
//	GET    /routes/{prefix}    one of them: /routes/10.1.0.0/24
//	PUT    /routes/{prefix}    desire one: {"gateway": "192.0.2.254", "device": "converge0"}
//	DELETE /routes/{prefix}    stop desiring one; it is deleted from the kernel
//
// Answers are JSON; errors are {"error": "..."} with a 4xx status when
// the request was at fault, and then nothing has changed.
type routeAPI struct {
	desired *desiredRoutes
}

// maxBodySize bounds a PUT body: a gateway and a device name fit many
// times over.
const maxBodySize = 4096

func (a *routeAPI) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /routes", a.list)
	mux.HandleFunc("GET /routes/{prefix...}", a.get)
	mux.HandleFunc("PUT /routes/{prefix...}", a.put)
	mux.HandleFunc("DELETE /routes/{prefix...}", a.delete)
}

func (a *routeAPI) list(w http.ResponseWriter, r *http.Request) {
	agentkit.WriteJSON(w, http.StatusOK, a.desired.List())
}

func (a *routeAPI) get(w http.ResponseWriter, r *http.Request) {
	prefix := r.PathValue("prefix")
	route, found := a.desired.Get(prefix)
	if !found {
		agentkit.WriteError(w, http.StatusNotFound, fmt.Errorf("no desired route for %q", prefix))
		return
	}
	agentkit.WriteJSON(w, http.StatusOK, route)
}

// putRequest is the body of a PUT; the prefix comes from the URL.
type putRequest struct {
	Gateway string `json:"gateway"`
	Device  string `json:"device"`
}

func (a *routeAPI) put(w http.ResponseWriter, r *http.Request) {
	spec := RouteSpec{Prefix: r.PathValue("prefix")}
	var req putRequest
	err := agentkit.DecodeJSON(w, r, maxBodySize, &req, `{"gateway": "192.0.2.254", "device": "converge0"}`)
	if err == nil {
		spec.Gateway, spec.Device = req.Gateway, req.Device
		_, err = parseRoute(spec)
	}
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, agentkit.ErrTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		agentkit.WriteError(w, status, err)
		return
	}
	route, created := a.desired.Put(spec)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	agentkit.WriteJSON(w, status, route)
}

func (a *routeAPI) delete(w http.ResponseWriter, r *http.Request) {
	prefix := r.PathValue("prefix")
	if !a.desired.Delete(prefix) {
		agentkit.WriteError(w, http.StatusNotFound, fmt.Errorf("no desired route for %q", prefix))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serveIndex lists the endpoints, for someone who curls the bare address.
func serveIndex(w http.ResponseWriter, r *http.Request) {
	fmt.Fprint(w, `converge routes agent: keeps the kernel's routes in a table of its own in sync with a table of desired routes

GET    /routes             desired routes and their reconciliation status
GET    /routes/{prefix}    one desired route: /routes/10.1.0.0/24
PUT    /routes/{prefix}    desire one: {"gateway": "192.0.2.254", "device": "converge0"} (either or both)
DELETE /routes/{prefix}    stop desiring one (it is deleted from the kernel)
GET    /status             what the reconciler is doing
GET    /healthz            200 when healthy, 503 and why when degraded
GET    /metrics            Prometheus metrics
GET    /debug/vars         expvar
`)
}
