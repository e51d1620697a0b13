// Package apigen is the API's server side as api/openapi.json says it, made
// by `make generate-server` (oapi-codegen, oapi-codegen.yaml here): the
// ServerInterface that api.Server implements, one method per operationId,
// and the Echo routes that bind each operation's path and query parameters
// to it. Its request and answer types are the Go client's (kit/client,
// generated from the same document with the same options), imported whole:
// the server and its clients share one set. Nothing here is written by
// hand; a route, a parameter or a field changes in the document and
// `make generate` carries it here, and check-generated (make test) fails
// when the two differ.
package apigen
