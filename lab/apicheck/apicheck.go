// Package apicheck holds the API's answers to api/openapi.json in tests:
// an answer's status must be one its operation documents, and its body that
// status's schema under its content type. The routes, parameters, request
// checks and many answer types are the document's by construction (apigen,
// api/operations.go); this checks every answer the API and end-to-end tests
// see, refusals included, so that no test keeps a list of statuses by hand.
// It takes the document as bytes (api.OpenAPIDocument): plumbing imports no
// layer above it.
package apicheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Checker holds answers to one OpenAPI document.
type Checker struct {
	router routers.Router
}

// New reads the document (api.OpenAPIDocument); its operations are found
// whatever the server's address.
func New(doc []byte) (*Checker, error) {
	d, err := openapi3.NewLoader().LoadFromData(doc)
	if err != nil {
		return nil, err
	}
	d.Servers = nil
	r, err := legacy.NewRouter(d)
	if err != nil {
		return nil, err
	}
	return &Checker{router: r}, nil
}

// Check is nil when status, header and body answer r as the document says.
// An answer to no operation (Echo's 404 or 405 for a path or method the
// document does not have) is no operation's, and is not checked.
func (ch *Checker) Check(r *http.Request, status int, header http.Header, body []byte) error {
	route, params, err := ch.router.FindRoute(r)
	if err != nil {
		return nil
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	})
	if err != nil {
		return fmt.Errorf("%s %s answered %d, not as openapi.json documents it: %w\nbody: %.500s", r.Method, r.URL.Path, status, err, body)
	}
	return nil
}

// Handler serves h and fails t for each answer Check refuses.
func (ch *Checker) Handler(t testing.TB, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		if err := ch.Check(r, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
			t.Error(err)
		}
	})
}

// Transport sends through base (http.DefaultTransport when nil) and fails t
// for each answer Check refuses; the answer's body is read and handed on
// whole.
func (ch *Checker) Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		if err != nil {
			return resp, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err := ch.Check(r, resp.StatusCode, resp.Header, body); err != nil {
			t.Error(err)
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
