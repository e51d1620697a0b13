package main

import (
	"context"
	"log/slog"
	"time"

	"go.temporal.io/sdk/interceptor"

	"github.com/hookflow/hookflow/internal/tracing"
)

// traceFlushTimeout bounds the flush of the last spans at exit.
const traceFlushTimeout = 5 * time.Second

// startTracing sets tracing up for this process from the OTEL_* variables
// (off unless they ask for it; see tracing.Setup). It returns the
// interceptors for the Temporal client and stop, which flushes the spans
// still buffered and must run before the process exits.
func startTracing(ctx context.Context, _ *cliEnv, service string, logger *slog.Logger) ([]interceptor.ClientInterceptor, func(), error) {
	tr, err := tracing.Setup(ctx, service, logger)
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		// ctx is done by now (that is why we stop); the flush gets its own time.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			logger.Warn("traces not flushed", "error", err)
		}
	}
	interceptors, err := tr.TemporalInterceptors()
	if err != nil {
		stop()
		return nil, nil, err
	}
	return interceptors, stop, nil
}
