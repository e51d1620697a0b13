package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"
)

// Problem is an RFC 9457 problem details object; every error the API returns
// is one, written by the central error handler.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Field names the request field at fault, when there is one.
	Field string `json:"field,omitempty"`
	// Extensions carry problem-specific members (e.g. high_water_mark).
	Extensions map[string]any `json:"-"`
}

func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail) }

// problemTypeBase prefixes problem type URIs; they name the kind of problem.
const problemTypeBase = "https://hookflow.dev/problems/"

func problem(status int, kind, title, detail string) *Problem {
	return &Problem{Type: problemTypeBase + kind, Title: title, Status: status, Detail: detail}
}

// statementTimedOut tells a statement Postgres cancelled at its
// statement_timeout (SQLSTATE 57014, query_canceled) from other errors. A
// cancel that pgx sent because the request's context ended comes back as
// the context's error, so only the server's timeout lands here.
func statementTimedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014"
}

func fieldProblem(field, detail string) *Problem {
	p := problem(http.StatusBadRequest, "invalid-field", "Invalid request field", detail)
	p.Field = field
	return p
}

// queryTimeout is the answer of a request whose statement ran past the
// statement timeout, its Retry-After set on c.
func queryTimeout(c echo.Context) *Problem {
	c.Response().Header().Set("Retry-After", "1")
	return problem(http.StatusServiceUnavailable, "query-timeout", "Query Timed Out",
		"the request's database work ran past the server's statement timeout and was cancelled; narrow the request (filters, a smaller limit) or retry later")
}

// errorHandler turns every error into problem+json. Errors that are not a
// *Problem or an echo.HTTPError are logged and answered 500 without detail.
func errorHandler(logger *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		var p *Problem
		var he *echo.HTTPError
		switch {
		case errors.As(err, &p):
		case statementTimedOut(err):
			// Not the request's fault, nor a fault: the database is
			// busier than this request's share (HOOKFLOW_STATEMENT_TIMEOUT).
			// Logged for the operator, without the statement's arguments.
			logger.Warn("request statement timed out", "method", c.Request().Method, "path", c.Path())
			p = queryTimeout(c)
		case errors.As(err, &he):
			if pp, ok := parameterProblem(he); ok {
				p = pp
				break
			}
			p = problem(he.Code, "http-"+fmt.Sprint(he.Code), http.StatusText(he.Code), fmt.Sprint(he.Message))
			switch he.Code {
			case http.StatusRequestEntityTooLarge:
				p.Type = problemTypeBase + "body-too-large"
				p.Detail = "request body exceeds the limit"
			case http.StatusNotFound:
				p.Type = problemTypeBase + "not-found"
				p.Detail = "no route for " + c.Request().Method + " " + c.Request().URL.Path
			case http.StatusMethodNotAllowed:
				p.Type = problemTypeBase + "method-not-allowed"
				p.Detail = c.Request().Method + " is not allowed on " + c.Request().URL.Path
			}
		default:
			logger.Error("request failed", "method", c.Request().Method, "path", c.Path(), "error", err)
			p = problem(http.StatusInternalServerError, "internal", "Internal Server Error", "")
		}
		if p.Instance == "" {
			p.Instance = c.Request().URL.Path
		}
		body := map[string]any{"type": p.Type, "title": p.Title, "status": p.Status, "instance": p.Instance}
		if p.Detail != "" {
			body["detail"] = p.Detail
		}
		if p.Field != "" {
			body["field"] = p.Field
		}
		for k, v := range p.Extensions {
			body[k] = v
		}
		c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
		if p.Status == http.StatusUnauthorized {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="hookflow"`)
		}
		if c.Request().Method == http.MethodHead {
			_ = c.NoContent(p.Status)
			return
		}
		c.Response().WriteHeader(p.Status)
		_ = encodeJSON(c.Response(), body)
	}
}
