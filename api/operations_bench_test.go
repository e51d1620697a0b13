package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/kit/intake"
)

// BenchmarkEventBodyCheck prints what the document's check of a POST
// /v1/events body costs beside the strict decode every body had before it
// (go test -run '^$' -bench EventBodyCheck ./api): the ratio of the two is
// the figure, not either time.
func BenchmarkEventBodyCheck(b *testing.B) {
	ops, err := loadOperations(openAPIDoc)
	if err != nil {
		b.Fatal(err)
	}
	c := echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/v1/events", nil), httptest.NewRecorder())
	c.Set(operationKey, ops["eventCreate"])
	body := []byte(`{"id":"evt_42","correlation_id":"order-42","sequence":3,"type":"order.updated","data":{"total":42,"lines":[{"sku":"a","n":2},{"sku":"b","n":1}],"note":"leave at the door"}}`)
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			var req intake.Request
			if err := json.Unmarshal(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode+check", func(b *testing.B) {
		for b.Loop() {
			var req intake.Request
			if err := json.Unmarshal(body, &req); err != nil {
				b.Fatal(err)
			}
			if err := checkBody(c, body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
