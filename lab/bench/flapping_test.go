package bench

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFlapReceiverAnswersOnceAPeriod: the flapping receiver answers 200 to
// the first request of each period and 500 to the rest.
func TestFlapReceiverAnswersOnceAPeriod(t *testing.T) {
	t.Parallel()
	f := &flapReceiver{every: time.Hour}
	codes := make([]int, 3)
	for i := range codes {
		w := httptest.NewRecorder()
		f.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(`{}`)))
		codes[i] = w.Code
	}
	require.Equal(t, []int{http.StatusOK, http.StatusInternalServerError, http.StatusInternalServerError}, codes)
	require.Equal(t, flapTally{requests: 3, oks: 1}, f.tally())
}

// TestFlappingReportVerdict: the run fails when disable_after never
// tripped, and its table ends with the summary line.
func TestFlappingReportVerdict(t *testing.T) {
	t.Parallel()
	rep := &FlappingReport{DurationSeconds: 600, DisableAfterSeconds: 180, OperationalEvents: map[string]int{}}
	require.ErrorContains(t, rep.Err(), "never tripped")
	rep.Disabled = true
	require.NoError(t, rep.Err())
	var b bytes.Buffer
	require.NoError(t, rep.WriteTable(&b))
	require.Contains(t, b.String(), "flapping duration=10m0s disable_after=3m0s")
}
