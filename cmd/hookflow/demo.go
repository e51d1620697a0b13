package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/kit/client"
)

const demoSummary = `Guided first run against a running "hookflow dev": sends events out of order and shows the
receiver apply them in order, produces a dead letter, skips it and shows its successor delivered.
Every step prints its Temporal Web UI link.`

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

func (d demo) workflowLink(id string) string { return d.ui + "/workflows/" + url.PathEscape(id) }

func (d demo) run(ctx context.Context) error {
	ep, err := d.api.EndpointGet(ctx, devEndpointID)
	if err != nil {
		return fmt.Errorf("is `hookflow dev` running? %w", d.api.fail(err))
	}
	suffix := strings.ToLower(rand.Text()[:6])
	fmt.Fprintf(d.out, "hookflow demo: API %s, receiver %s, dev endpoint %s → %s\n", d.api.BaseURL(), d.receiver, ep.ID, ep.URL)

	// 1. Out of order in, in order out.
	corr := "demo-" + suffix
	d.step(1, "Send sequences 3, 1, 2 of correlation "+corr+" (out of order)")
	ids := map[int64]string{}
	for _, seq := range []int64{3, 1, 2} {
		id := fmt.Sprintf("%s-%d", corr, seq)
		ids[seq] = id
		if err := d.postEvent(ctx, id, corr, seq, devEndpointID, seq*10); err != nil {
			return err
		}
		fmt.Fprintf(d.out, "   sent sequence %d as %s   %s\n", seq, id, d.workflowLink(id))
		time.Sleep(300 * time.Millisecond) // let each arrive before the next: the receiver sees the gap
	}
	fmt.Fprintf(d.out, "   all of it:  %s\n", d.correlationLink(corr))
	for _, seq := range []int64{1, 2, 3} {
		if err := d.waitState(ctx, ids[seq], client.StateDelivered); err != nil {
			return err
		}
	}
	var rc struct {
		LastSequence int64       `json:"last_sequence"`
		Applied      []string    `json:"applied"`
		Balance      json.Number `json:"balance"`
	}
	if err := d.getJSON(ctx, d.receiver+"/correlations/"+url.PathEscape(corr), &rc); err != nil {
		return fmt.Errorf("ask the receiver: %w", err)
	}
	fmt.Fprintf(d.out, "   receiver applied, in order: %s (last sequence %d, balance %s)\n", strings.Join(rc.Applied, ", "), rc.LastSequence, rc.Balance)

	// 2. A dead letter: an endpoint whose secret the receiver does not know.
	d.step(2, "Produce a dead letter: a new endpoint signs with a secret the receiver does not know (401)")
	bad, err := d.api.EndpointCreate(ctx, client.EndpointCreateRequest{URL: d.receiver + "/webhook"})
	if err != nil {
		return d.api.fail(err)
	}
	fmt.Fprintf(d.out, "   created endpoint %s → %s/webhook\n", bad.ID, d.receiver)
	// Sequence 1 goes to the bad endpoint, 2 to the dev receiver: ordering
	// is per correlation, so 2 waits for 1 whatever its endpoint.
	dlCorr := "demo-" + suffix + "-dlq"
	dl1, dl2 := dlCorr+"-1", dlCorr+"-2"
	if err := d.postEvent(ctx, dl1, dlCorr, 1, bad.ID, 5); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "   sent sequence 1 as %s to %s   %s\n", dl1, bad.ID, d.workflowLink(dl1))
	if err := d.postEvent(ctx, dl2, dlCorr, 2, devEndpointID, 7); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "   sent sequence 2 as %s to %s   %s\n", dl2, devEndpointID, d.workflowLink(dl2))
	fmt.Fprintf(d.out, "   all of it:  %s\n", d.correlationLink(dlCorr))
	if err := d.waitState(ctx, dl1, client.StateDeadLettered); err != nil {
		return err
	}
	dl, err := d.api.DeadLetterGet(ctx, dl1, "")
	if err != nil {
		return d.api.fail(err)
	}
	fmt.Fprintf(d.out, "   dead letter %s: %s\n", dl.EventID, truncate(dl.Reason, 100))
	c, err := d.api.CorrelationGet(ctx, dlCorr)
	if err != nil {
		return d.api.fail(err)
	}
	fmt.Fprintf(d.out, "   %s is held: next sequence %d, parked %v (order is never broken silently)\n", dlCorr, c.NextSequence, c.Parked)
	fmt.Fprintf(d.out, "   inspect it: hookflow dlq show %s    or: hookflow status\n", dl1)

	// 3. Operator action. A replay would meet the same 401 (the receiver
	// cannot learn this endpoint's secret), so the demo skips: the
	// successor then carries skipped_sequences [1] and is applied.
	d.step(3, "Skip the dead letter (recorded: who, when, why); its successor is delivered")
	if _, err := d.api.DeadLetterSkip(ctx, dl1, client.OperatorRequest{Note: "demo: the receiver does not know this endpoint's secret"}); err != nil {
		return d.api.fail(err)
	}
	if err := d.waitState(ctx, dl1, client.StateSkipped); err != nil {
		return err
	}
	if err := d.waitState(ctx, dl2, client.StateDelivered); err != nil {
		return err
	}
	if err := d.getJSON(ctx, d.receiver+"/correlations/"+url.PathEscape(dlCorr), &rc); err != nil {
		return fmt.Errorf("ask the receiver: %w", err)
	}
	fmt.Fprintf(d.out, "   receiver applied: %s (last sequence %d; it was told 1 was skipped)\n", strings.Join(rc.Applied, ", "), rc.LastSequence)
	fmt.Fprintln(d.out, "   When the receiver is the one at fault, fix it and `hookflow dlq replay <id>` (or --all): a fresh recovery window, same identifiers.")
	if _, err := d.api.EndpointUpdate(ctx, bad.ID, client.EndpointUpdateRequest{Disabled: new(true)}); err != nil {
		return d.api.fail(err)
	}
	fmt.Fprintf(d.out, "   cleaned up: endpoint %s disabled\n", bad.ID)

	d.step(4, "Where things stand")
	fmt.Fprintln(d.out, "   hookflow status          queue depth, in flight, dead letters, lag, blocked correlations")
	fmt.Fprintf(d.out, "   %s/metrics   Prometheus\n", d.api.BaseURL())
	fmt.Fprintf(d.out, "   %s/workflows   every workflow\n", d.ui)
	return nil
}

func (d demo) postEvent(ctx context.Context, id, corr string, seq int64, endpointID string, amount int64) error {
	_, err := d.api.EventCreate(ctx, client.EventCreateRequest{
		ID: id, CorrelationID: corr, Sequence: seq, EndpointID: endpointID, Type: "ledger.entry",
		Data: map[string]any{"amount": amount},
	})
	return d.api.fail(err)
}

// waitState polls the event until it reaches state, printing progress.
func (d demo) waitState(ctx context.Context, id string, state client.State) error {
	fmt.Fprintf(d.out, "   waiting for %s to be %s ", id, state)
	deadline := time.Now().Add(d.wait)
	last := client.State("")
	for {
		ev, err := d.api.EventGet(ctx, id)
		if err != nil {
			fmt.Fprintln(d.out)
			return d.api.fail(err)
		}
		if ev.State == state {
			attempts := 0
			for _, dv := range ev.Deliveries {
				attempts += len(dv.Attempts)
			}
			fmt.Fprintf(d.out, " %s (%d deliveries, %d attempt(s))\n", state, len(ev.Deliveries), attempts)
			return nil
		}
		if ev.State != last {
			fmt.Fprintf(d.out, "[%s]", ev.State)
			last = ev.State
		} else {
			fmt.Fprint(d.out, ".")
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(d.out)
			return fmt.Errorf("%s is still %s after %s", id, ev.State, d.wait)
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
