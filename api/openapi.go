package api

import (
	"bytes"
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPIDocument returns the OpenAPI 3.1 description of this API. A test
// walks the router and the handlers' statuses against it, so it stays true.
func OpenAPIDocument() []byte { return bytes.Clone(openAPIDoc) }

// openAPI serves the document; no token needed, it holds no secrets.
func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDoc)
}
