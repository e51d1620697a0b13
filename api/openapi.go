package api

import (
	"bytes"
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPIDocument returns the OpenAPI 3.1 description of this API: the
// source its routes, parameters, types and checks are generated or read
// from (apigen, operations.go).
func OpenAPIDocument() []byte { return bytes.Clone(openAPIDoc) }

// Openapi serves the document; no token needed, it holds no secrets.
func (s *Server) Openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDoc)
}
