package main

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/cilium/statedb/index"

	"github.com/converge-go/converge/example/internal/agentkit"
	"github.com/converge-go/converge/reconciler"
)

// fileAPI serves the desired files over HTTP:
//
//	GET    /files         every desired file with its status (fileView:
//	                      no content)
//	GET    /files/{name}  one of them
//	GET    /explain/{name} why that file is not Done (text; JSON with ?json)
//	PUT    /files/{name}  create or change one: {"content": "...", "mode": "0644"}
//	DELETE /files/{name}  stop desiring one; its file is removed
//
// Answers are JSON; errors are {"error": "..."} with a 4xx status when the
// request was at fault, and then nothing has changed.
type fileAPI struct {
	desired *desiredState
	rec     reconciler.Reconciler[*File]
}

// maxBodySize bounds a PUT body: the largest content, JSON-escaped at up to
// six bytes a byte ("\u0000"), plus room for the rest of the object.
const maxBodySize = 6*MaxContentSize + 4096

func (a *fileAPI) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /files", a.list)
	mux.HandleFunc("GET /files/{name}", a.get)
	mux.HandleFunc("PUT /files/{name}", a.put)
	mux.HandleFunc("DELETE /files/{name}", a.delete)
	mux.HandleFunc("GET /explain/{name}", a.explain)
}

// explain answers where a file stands for the reconciler and why it is
// not Done (reconciler.Explanation): as text, or JSON with ?json. A file
// deleted a moment ago is explained too (Absent once its Delete is done).
func (a *fileAPI) explain(w http.ResponseWriter, r *http.Request) {
	e, err := a.rec.Explain(r.Context(), index.String(r.PathValue("name")))
	if err != nil {
		agentkit.WriteError(w, http.StatusServiceUnavailable, err)
		return
	}
	if r.URL.Query().Has("json") {
		agentkit.WriteJSON(w, http.StatusOK, e)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, e)
}

// fileView is a desired file as GET shows it: its content left out, and
// its size instead. The API has no authentication, and a file from
// --desired-dir comes from a manifest its caller may not be allowed to
// read (a root-only directory, a 0600 file); an API file's content is
// written where the caller may not read it either.
type fileView struct {
	Name   string            `json:"name"`
	Size   int               `json:"size"`
	Mode   FileMode          `json:"mode"`
	Origin string            `json:"origin,omitempty"`
	Status reconciler.Status `json:"status"`
}

func viewOf(f *File) fileView {
	return fileView{Name: f.Name, Size: len(f.Content), Mode: f.Mode, Origin: f.Origin, Status: f.Status}
}

func (a *fileAPI) list(w http.ResponseWriter, r *http.Request) {
	files := a.desired.List()
	views := make([]fileView, len(files))
	for i, f := range files {
		views[i] = viewOf(f)
	}
	agentkit.WriteJSON(w, http.StatusOK, views)
}

func (a *fileAPI) get(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f, found := a.desired.Get(name)
	if !found {
		agentkit.WriteError(w, http.StatusNotFound, fmt.Errorf("no desired file %q", name))
		return
	}
	agentkit.WriteJSON(w, http.StatusOK, viewOf(f))
}

// putRequest is the body of a PUT. Mode is optional (DefaultMode).
type putRequest struct {
	Content *string   `json:"content"`
	Mode    *FileMode `json:"mode"`
}

func (a *fileAPI) put(w http.ResponseWriter, r *http.Request) {
	spec, err := readPut(w, r)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errTooLarge) || errors.Is(err, agentkit.ErrTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		agentkit.WriteError(w, status, err)
		return
	}
	f, created, err := a.desired.Put(spec)
	if err != nil {
		agentkit.WriteError(w, errorStatus(err), err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	agentkit.WriteJSON(w, status, f)
}

// readPut decodes and validates a PUT: the name from the URL, the rest
// from the body. Unknown fields are refused, so that a typo such as
// "contents" is not silently an empty file.
func readPut(w http.ResponseWriter, r *http.Request) (FileSpec, error) {
	spec := FileSpec{Name: r.PathValue("name"), Mode: DefaultMode}
	if !validName.MatchString(spec.Name) {
		return spec, spec.validate() // says what is wrong with the name
	}
	var req putRequest
	if err := agentkit.DecodeJSON(w, r, maxBodySize, &req, `{"content": "...", "mode": "0644"}`); err != nil {
		return spec, err
	}
	if req.Content == nil {
		return spec, errors.New(`bad request: "content" is missing (use "" for an empty file)`)
	}
	spec.Content = *req.Content
	if req.Mode != nil {
		spec.Mode = *req.Mode
	}
	return spec, spec.validate()
}

func (a *fileAPI) delete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	found, err := a.desired.Delete(name)
	switch {
	case err != nil:
		agentkit.WriteError(w, errorStatus(err), err)
	case !found:
		agentkit.WriteError(w, http.StatusNotFound, fmt.Errorf("no desired file %q", name))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
