package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/oapi-codegen/nullable"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/client"
)

const demoSummary = `Guided first run against a running "hookflow dev": publishes events once, out of order, to two
endpoints subscribed to their type; the healthy one applies them in order while the failing one's lane waits on
its dead letter; then skips it and shows that lane move on. Every step prints its Temporal Web UI link.`

// runDemo walks a newcomer through hookflow against `hookflow dev`.
func runDemo(ctx context.Context, env *cliEnv, args []string) error {
	var receiverURL, uiURL, namespace string
	var wait time.Duration
	cfg, rest, err := config.LoadWithFlags("demo", demoSummary, apiClientSettings, args, env.getenv, apiClientDefaults(), env.stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&receiverURL, "receiver-url", "http://127.0.0.1:8090", "the dev reference receiver")
		fs.StringVar(&uiURL, "ui-url", "http://127.0.0.1:8233", "the Temporal Web UI")
		fs.StringVar(&namespace, "namespace", "default", "Temporal namespace (for the UI links)")
		fs.DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for each step")
	})
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return &config.UsageError{Msg: "demo takes no arguments"}
	}
	cl, err := newAPIClient(cfg)
	if err != nil {
		return err
	}
	d := demo{
		out: env.stdout, api: cl,
		receiver: strings.TrimRight(receiverURL, "/"), ui: strings.TrimRight(uiURL, "/") + "/namespaces/" + url.PathEscape(namespace),
		wait: wait,
	}
	return d.run(ctx)
}

type demo struct {
	out      io.Writer
	api      apiClient
	receiver string
	ui       string
	wait     time.Duration
}

func (d demo) step(n int, title string) { fmt.Fprintf(d.out, "\n── %d. %s\n", n, title) }

func (d demo) correlationLink(id string) string {
	return d.ui + "/workflows?query=" + url.QueryEscape(`CorrelationId="`+id+`"`)
}

// workflowLink links the event's workflow: its ID carries the tenant (the
// demo runs on the dev token, in the default tenant), and escaping keeps
// the tenant's slash in the one path segment the Web UI reads as the ID.
func (d demo) workflowLink(eventID string) string {
	return d.ui + "/workflows/" + url.PathEscape(contract.EventWorkflowID(contract.DefaultTenant, eventID))
}

func (d demo) endpointLink(corr, endpointID string) string {
	return d.ui + "/workflows?query=" + url.QueryEscape(`CorrelationId="`+corr+`" AND EndpointIds="`+endpointID+`"`)
}

func (d demo) run(ctx context.Context) error {
	r, err := d.api.EndpointGetWithResponse(ctx, devEndpointID, nil)
	if err != nil {
		return fmt.Errorf("is `hookflow dev` running? %w", d.api.fail(err))
	}
	ep := r.JSON200
	suffix := strings.ToLower(rand.Text()[:6])
	fmt.Fprintf(d.out, "hookflow demo: API %s, receiver %s, dev endpoint %s → %s\n", d.api.BaseURL(), d.receiver, ep.ID, ep.URL)

	// 1. Publish once; two subscribers; one of them fails.
	d.step(1, "Subscribe a second endpoint to order.* — one the receiver refuses (it signs with a secret the receiver does not know: 401)")
	created, err := d.api.EndpointCreateWithResponse(ctx, client.EndpointCreate{URL: d.receiver + "/webhook", EventTypes: nullable.NewNullableWithValue([]string{"order.*"})})
	if err != nil {
		return d.api.fail(err)
	}
	bad := created.JSON201
	fmt.Fprintf(d.out, "   created endpoint %s → %s/webhook, event_types [order.*]; %s takes every type\n", bad.ID, d.receiver, devEndpointID)
	corr := "demo-" + suffix
	d.step(2, "Publish sequences 3, 1, 2 of correlation "+corr+" once each (out of order, no endpoint_id)")
	ids := map[int64]string{}
	for _, seq := range []int64{3, 1, 2} {
		id := fmt.Sprintf("%s-%d", corr, seq)
		ids[seq] = id
		acc, err := d.publish(ctx, id, corr, seq, seq*10)
		if err != nil {
			return err
		}
		var to []string
		for _, dv := range acc.Deliveries {
			to = append(to, dv.EndpointID)
		}
		fmt.Fprintf(d.out, "   published sequence %d as %s → %s   %s\n", seq, id, strings.Join(to, ", "), d.workflowLink(id))
		time.Sleep(300 * time.Millisecond) // let each arrive before the next: the receiver sees the gap
	}
	fmt.Fprintf(d.out, "   all of it:  %s\n", d.correlationLink(corr))
	fmt.Fprintf(d.out, "   by endpoint: %s\n", d.endpointLink(corr, bad.ID))
	for _, seq := range []int64{1, 2, 3} {
		if err := d.waitDelivery(ctx, ids[seq], devEndpointID, client.StateDelivered); err != nil {
			return err
		}
	}
	var rc struct {
		LastSequence int64       `json:"last_sequence"`
		Applied      []string    `json:"applied"`
		Balance      json.Number `json:"balance"`
	}
	if err := d.getJSON(ctx, d.receiver+"/correlations/"+url.PathEscape(corr)+"?endpoint_id="+url.QueryEscape(devEndpointID), &rc); err != nil {
		return fmt.Errorf("ask the receiver: %w", err)
	}
	fmt.Fprintf(d.out, "   %s applied, in order: %s (last sequence %d, balance %s)\n", devEndpointID, strings.Join(rc.Applied, ", "), rc.LastSequence, rc.Balance)
	if err := d.waitDelivery(ctx, ids[1], bad.ID, client.StateDeadLettered); err != nil {
		return err
	}
	got, err := d.api.DeadLetterGetWithResponse(ctx, ids[1], &client.DeadLetterGetParams{EndpointID: &bad.ID})
	if err != nil {
		return d.api.fail(err)
	}
	dl := got.JSON200
	fmt.Fprintf(d.out, "   dead letter %s at %s: %s\n", dl.EventID, dl.EndpointID, truncate(dl.Reason, 100))
	if err := d.lanes(ctx, corr); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "   inspect it: hookflow dlq show %s --endpoint-id %s    or: hookflow status\n", ids[1], bad.ID)

	// 3. Operator action on the failing lane only. A replay would meet the
	// same 401 (the receiver cannot learn this endpoint's secret), so the
	// demo skips: the lane's next delivery then carries skipped_sequences
	// [1], and fails the same way; the healthy lane never waited.
	d.step(3, "Skip the dead letter at "+bad.ID+" (recorded: who, when, why); that lane moves on to 2")
	if _, err := d.api.DeadLetterSkipWithResponse(ctx, ids[1], nil, client.Operator{EndpointID: bad.ID, Note: "demo: the receiver does not know this endpoint's secret"}); err != nil {
		return d.api.fail(err)
	}
	if err := d.waitDelivery(ctx, ids[1], bad.ID, client.StateSkipped); err != nil {
		return err
	}
	if err := d.waitDelivery(ctx, ids[2], bad.ID, client.StateDeadLettered); err != nil {
		return err
	}
	if err := d.lanes(ctx, corr); err != nil {
		return err
	}
	fmt.Fprintln(d.out, "   When the receiver is the one at fault, fix it and `hookflow dlq replay <id> --endpoint-id <ep>` (or --all):")
	fmt.Fprintln(d.out, "   a fresh recovery window, same identifiers, and the lane goes on in order.")
	if _, err := d.api.EndpointUpdateWithResponse(ctx, bad.ID, nil, client.EndpointUpdate{Disabled: new(true)}); err != nil {
		return d.api.fail(err)
	}
	fmt.Fprintf(d.out, "   cleaned up: endpoint %s disabled (its lane keeps what it holds; nothing new is routed to it)\n", bad.ID)

	d.step(4, "Where things stand")
	fmt.Fprintln(d.out, "   hookflow status          queue depth, in flight, dead letters, lag, per endpoint, blocked lanes")
	fmt.Fprintf(d.out, "   %s/metrics   Prometheus\n", d.api.BaseURL())
	fmt.Fprintf(d.out, "   %s/workflows   every workflow\n", d.ui)
	return nil
}

// lanes prints each lane of the correlation.
func (d demo) lanes(ctx context.Context, corr string) error {
	r, err := d.api.CorrelationGetWithResponse(ctx, corr, nil)
	if err != nil {
		return d.api.fail(err)
	}
	c := r.JSON200
	for _, l := range c.Lanes {
		line := fmt.Sprintf("   lane %s: last delivered %d, parked %v", l.EndpointID, l.PreviousSequence, l.Parked)
		if l.BlockedBy != nil {
			line += fmt.Sprintf(", held by %d (%s)", l.BlockedBy.Sequence, l.BlockedBy.State)
		}
		fmt.Fprintln(d.out, line)
	}
	return nil
}

func (d demo) publish(ctx context.Context, id, corr string, seq int64, amount int64) (client.Accepted, error) {
	acc, err := d.api.Send(ctx, client.EventCreate{
		ID: id, CorrelationID: corr, Sequence: seq, Type: "order.updated",
		Data: map[string]any{"amount": amount},
	})
	return acc, d.api.fail(err)
}

// waitDelivery polls the event until its delivery to endpointID reaches
// state, printing progress.
func (d demo) waitDelivery(ctx context.Context, id, endpointID string, state client.State) error {
	fmt.Fprintf(d.out, "   waiting for %s at %s to be %s ", id, endpointID, state)
	deadline := time.Now().Add(d.wait)
	last := client.State("")
	for {
		r, err := d.api.EventGetWithResponse(ctx, id, nil)
		if err != nil {
			fmt.Fprintln(d.out)
			return d.api.fail(err)
		}
		ev := r.JSON200
		dv, _ := ev.Delivery(endpointID)
		if dv.State == state {
			fmt.Fprintf(d.out, " %s (%d attempt(s))\n", state, dv.AttemptCount)
			return nil
		}
		if dv.State != last {
			fmt.Fprintf(d.out, "[%s]", dv.State)
			last = dv.State
		} else {
			fmt.Fprint(d.out, ".")
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(d.out)
			return fmt.Errorf("%s at %s is still %s after %s", id, endpointID, dv.State, d.wait)
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(d.out)
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (d demo) getJSON(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
