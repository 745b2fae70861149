package apiservertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The server is the generic API server of apiextensions-apiserver: it
// serves the discovery documents of each group (/apis/<group> and
// /apis/<group>/<version>), but neither the list of groups (/apis, which
// kube-apiserver's aggregator serves) nor the legacy core group (/api).
// Clients that discover every group first (controller-runtime's
// RESTMapper, kubectl) fail on them. The transport answers these three
// itself: /apis from the CRDs the server has and the groups' own
// documents, /api and /api/v1 with a core group that has no resources.
// Discovery then succeeds and finds exactly what the server serves.

// discovery answers the discovery requests the server does not serve,
// or returns nil for any other request.
func (t *switchTransport) discovery(req *http.Request, host, token string, rt http.RoundTripper) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return nil, nil
	}
	var body any
	switch strings.TrimSuffix(req.URL.Path, "/") {
	case "/apis":
		groups, err := groupList(req, host, token, rt)
		if err != nil {
			return nil, err
		}
		body = groups
	case "/api":
		body = &metav1.APIVersions{
			TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
			Versions:                   []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: host}},
		}
	case "/api/v1":
		body = &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "v1",
			APIResources: []metav1.APIResource{},
		}
	default:
		return nil, nil
	}
	b, _ := json.Marshal(body)
	return &http.Response{
		StatusCode: http.StatusOK,
		Status:     "200 OK",
		// Plain JSON, not the aggregated discovery format: clients that
		// asked for aggregated discovery fall back to these documents.
		Header:  http.Header{"Content-Type": []string{"application/json"}},
		Body:    io.NopCloser(bytes.NewReader(b)),
		Request: req,
		Proto:   "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

// groupList is the /apis document: apiextensions.k8s.io, then the group
// of every CRD, by name, each as the server's /apis/<group> describes it.
func groupList(req *http.Request, host, token string, rt http.RoundTripper) (*metav1.APIGroupList, error) {
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := getJSON(req, host, token, rt, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crds); err != nil {
		return nil, err
	}
	names := []string{apiextensionsv1.GroupName}
	for _, crd := range crds.Items {
		if !slices.Contains(names, crd.Spec.Group) {
			names = append(names, crd.Spec.Group)
		}
	}
	slices.Sort(names[1:])
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, name := range names {
		var g metav1.APIGroup
		err := getJSON(req, host, token, rt, "/apis/"+name, &g)
		if errors.Is(err, errNotServed) {
			continue // a CRD not established yet
		}
		if err != nil {
			return nil, err
		}
		list.Groups = append(list.Groups, g)
	}
	return list, nil
}

// errNotServed: the server answered 404.
var errNotServed = errors.New("not served")

// getJSON gets path from the server, as req's client, into v.
func getJSON(req *http.Request, host, token string, rt http.RoundTripper, path string, v any) error {
	out, err := http.NewRequestWithContext(req.Context(), http.MethodGet, "https://"+host+path, nil)
	if err != nil {
		return err
	}
	out.Header.Set("Authorization", "Bearer "+token)
	out.Header.Set("Accept", "application/json")
	resp, err := rt.RoundTrip(out)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return err
	case resp.StatusCode == http.StatusNotFound:
		return errNotServed
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

// strategicToMerge rewrites a strategic merge patch of an Event into a
// JSON merge patch. client-go's events library updates an event series
// with a strategic merge patch, which custom resources (InstallEvents
// serves Events as one) do not accept; the patch only sets the series
// object, for which both kinds of patch mean the same.
func strategicToMerge(req *http.Request) {
	if req.Method != http.MethodPatch || !strings.HasPrefix(req.URL.Path, "/apis/events.k8s.io/") {
		return
	}
	if req.Header.Get("Content-Type") == string("application/strategic-merge-patch+json") {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
}
