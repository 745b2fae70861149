package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/converge-go/converge/example/internal/agentkit"
)

// ruleAPI serves the desired rules over HTTP:
//
//	GET    /rules         every desired rule with its status
//	GET    /rules/{name}  one of them
//	PUT    /rules/{name}  create or change one: {"protocol": "tcp", "port": 22}
//	DELETE /rules/{name}  stop desiring one
//	GET    /ruleset       the table as nft lists it, from the namespace
//
// Answers are JSON (but /ruleset); errors are {"error": "..."} with a 4xx
// status when the request was at fault, and then nothing has changed.
type ruleAPI struct {
	desired *desiredRules
	nft     nftRunner
}

// maxBodySize bounds a PUT body: the largest comment, JSON-escaped at up
// to six bytes a byte, plus room for the rest of the object.
const maxBodySize = 6*MaxCommentSize + 1024

// errTooLarge is wrapped by parseRule's error for an oversized body: the
// API answers it with 413 Content Too Large.
var errTooLarge = errors.New("request too large")

func (a *ruleAPI) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /rules", a.list)
	mux.HandleFunc("GET /rules/{name}", a.get)
	mux.HandleFunc("PUT /rules/{name}", a.put)
	mux.HandleFunc("DELETE /rules/{name}", a.delete)
	mux.HandleFunc("GET /ruleset", a.ruleset)
}

func (a *ruleAPI) list(w http.ResponseWriter, r *http.Request) {
	agentkit.WriteJSON(w, http.StatusOK, a.desired.List())
}

func (a *ruleAPI) get(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	rule, found := a.desired.Get(name)
	if !found {
		agentkit.WriteError(w, http.StatusNotFound, fmt.Errorf("no desired rule %q", name))
		return
	}
	agentkit.WriteJSON(w, http.StatusOK, rule)
}

func (a *ruleAPI) put(w http.ResponseWriter, r *http.Request) {
	spec, err := parseRule(r.PathValue("name"), http.MaxBytesReader(w, r.Body, maxBodySize))
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		agentkit.WriteError(w, status, err)
		return
	}
	rule, created, err := a.desired.Put(spec)
	if err != nil {
		agentkit.WriteError(w, http.StatusInternalServerError, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	agentkit.WriteJSON(w, status, rule)
}

func (a *ruleAPI) delete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	found, err := a.desired.Delete(name)
	switch {
	case err != nil:
		agentkit.WriteError(w, http.StatusInternalServerError, err)
	case !found:
		agentkit.WriteError(w, http.StatusNotFound, fmt.Errorf("no desired rule %q", name))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// ruleset shows the table as it is in the namespace, which people cannot
// list themselves when the namespace is the program's private one.
func (a *ruleAPI) ruleset(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	out, err := a.nft.Run(ctx, "", "list", "table", tableFamily, tableName)
	if err != nil {
		agentkit.WriteError(w, http.StatusServiceUnavailable, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, out)
}

// putRequest is the body of a PUT. Protocol and port are required.
type putRequest struct {
	Protocol *string `json:"protocol"`
	Port     *int    `json:"port"`
	EndPort  int     `json:"end_port"`
	Comment  string  `json:"comment"`
}

// parseRule decodes and validates a PUT: the name from the URL, the rest
// from the body. Unknown fields are refused, so that a typo such as
// "ports" is not silently a missing field. The error says what is wrong;
// it wraps errTooLarge when body is an http.MaxBytesReader that hit its
// limit.
func parseRule(name string, body io.Reader) (RuleSpec, error) {
	spec := RuleSpec{Name: name}
	if !validName.MatchString(name) {
		return spec, spec.Validate() // says what is wrong with the name
	}
	var req putRequest
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return spec, fmt.Errorf("%w: the request body is over %d bytes", errTooLarge, tooLarge.Limit)
		case errors.Is(err, io.EOF):
			err = errors.New(`empty body, want {"protocol": "tcp", "port": 22}`)
		}
		return spec, fmt.Errorf("bad JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return spec, errors.New("bad JSON: unexpected data after the object")
	}
	switch {
	case req.Protocol == nil:
		return spec, errors.New(`bad request: "protocol" is missing ("tcp" or "udp")`)
	case req.Port == nil:
		return spec, errors.New(`bad request: "port" is missing`)
	}
	spec.Protocol, spec.Port, spec.EndPort, spec.Comment = *req.Protocol, *req.Port, req.EndPort, req.Comment
	return spec, spec.Validate()
}
