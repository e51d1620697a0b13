package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/workflows"
)

// Registered names of the baseline.
const (
	BaselineWorkflowName = "BenchBaselineWorkflow"
	BaselineDeliverName  = "BenchBaselineDeliver"
)

// baselineWindow is the baseline's retry window; it never fails in a bench.
const baselineWindow = 5 * time.Minute

// BaselineWorkflow is what hookflow is measured against: the bare Temporal
// way to send a webhook, one workflow per event with one regular delivery
// activity, no ordering and no ledger. It uses hookflow's own activity
// options, so retries and timeouts cost the same.
func BaselineWorkflow(ctx workflow.Context, in contract.DeliverInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflows.DeliverOptions(baselineWindow, in.Timeout))
	return workflow.ExecuteActivity(ctx, BaselineDeliverName, in).Get(ctx, nil)
}

// BaselineActivities posts events to one receiver URL.
type BaselineActivities struct {
	url     string
	secrets []string
	http    *http.Client
}

// NewBaselineActivities returns the baseline's delivery activity for url,
// signing with secrets; it uses hookflow's delivery HTTP client.
func NewBaselineActivities(url string, secrets []string) *BaselineActivities {
	return &BaselineActivities{url: url, secrets: secrets, http: egress.Policy{AllowPrivate: true}.NewClient()}
}

// Deliver makes one signed POST of the event, like hookflow's Deliver minus
// every ledger write: 2xx other than 202 is delivered, another 4xx (except
// 408 and 429) is permanent, anything else is retried.
func (a *BaselineActivities) Deliver(ctx context.Context, in contract.DeliverInput) error {
	body, err := json.Marshal(in.Envelope())
	if err != nil {
		return temporal.NewNonRetryableApplicationError("encode envelope: "+err.Error(), contract.ErrTypePermanent, nil)
	}
	ts := time.Now().Unix()
	sig, err := webhook.Sign(a.secrets, in.EventID, ts, body)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("sign: "+err.Error(), contract.ErrTypePermanent, nil)
	}
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return temporal.NewNonRetryableApplicationError("build request: "+err.Error(), contract.ErrTypePermanent, nil)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hookflow-bench")
	req.Header.Set(webhook.HeaderID, in.EventID)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(webhook.HeaderSignature, sig)
	resp, err := a.http.Do(req)
	if err != nil {
		return temporal.NewApplicationError("deliver: "+err.Error(), contract.ErrTypeRetryable)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	what := fmt.Sprintf("receiver answered %d (attempt %d)", resp.StatusCode, activity.GetInfo(ctx).Attempt)
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300 && c != http.StatusAccepted:
		return nil
	case c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests:
		return temporal.NewNonRetryableApplicationError(what, contract.ErrTypePermanent, nil)
	default:
		return temporal.NewApplicationError(what, contract.ErrTypeRetryable)
	}
}

// WorkerConfig is what the baseline worker needs.
type WorkerConfig struct {
	TaskQueue   string
	ReceiverURL string
	Secrets     []string
}

// RunBaselineWorker runs the baseline's worker on c until ctx is done, with
// the same worker options as hookflow's worker (SDK defaults).
func RunBaselineWorker(ctx context.Context, c client.Client, cfg WorkerConfig, logger *slog.Logger) error {
	if cfg.TaskQueue == "" || cfg.ReceiverURL == "" || len(cfg.Secrets) == 0 {
		return errors.New("baseline worker: task queue, receiver URL and secret are required")
	}
	w := sdkworker.New(c, cfg.TaskQueue, sdkworker.Options{WorkerStopTimeout: 20 * time.Second})
	w.RegisterWorkflowWithOptions(BaselineWorkflow, workflow.RegisterOptions{Name: BaselineWorkflowName})
	acts := NewBaselineActivities(cfg.ReceiverURL, cfg.Secrets)
	w.RegisterActivityWithOptions(acts.Deliver, activity.RegisterOptions{Name: BaselineDeliverName})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start baseline worker: %w", err)
	}
	logger.Info("baseline worker started", "task_queue", cfg.TaskQueue, "receiver", cfg.ReceiverURL)
	<-ctx.Done()
	w.Stop()
	return nil
}
