package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/printable"
	"github.com/hookflow/hookflow/kit/client"
)

const dlqUsage = `usage: hookflow dlq <list|show|replay|skip> [flags]

  list   [--correlation-id ID] [--endpoint-id ID] [--since T] [--until T] [--status open|replayed|skipped|all] [--json]
  show   <event id> [--endpoint-id ID] [--json]
  replay <event id> [--endpoint-id ID]  replay one dead letter (a fresh recovery window)
  replay --all [filters of list]        replay every open match, each lane in sequence order
  skip   <event id> [--endpoint-id ID] --note TEXT
                                        give it up; its lane's successors go on

A dead letter is one delivery (event, endpoint): --endpoint-id names it, and
may be left out when the event has one open dead letter.

Talks to the API at HOOKFLOW_API_URL with HOOKFLOW_API_TOKEN, on the
tenant --tenant (HOOKFLOW_TENANT) names (an operator key's; a tenant key
acts on its own).`

// runDLQ lists, shows, replays and skips dead letters through the API.
func runDLQ(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(env.stdout, dlqUsage)
		if len(args) == 0 {
			return &config.UsageError{Msg: "dlq needs a subcommand: list, show, replay or skip"}
		}
		return config.ErrHelp
	}
	sub := args[0]
	var (
		corr, endpoint, since, until, status, note string
		asJSON, all                                bool
	)
	flags := func(fs *flag.FlagSet) {
		fs.StringVar(&corr, "correlation-id", "", "only this correlation")
		fs.StringVar(&endpoint, "endpoint-id", "", "only this endpoint (show, replay, skip: the delivery's endpoint)")
		fs.StringVar(&since, "since", "", "dead-lettered at or after (RFC 3339)")
		fs.StringVar(&until, "until", "", "dead-lettered before (RFC 3339)")
		fs.StringVar(&status, "status", "", "open (default), replayed, skipped or all")
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.BoolVar(&all, "all", false, "replay: every open match of the filters")
		fs.StringVar(&note, "note", "", "skip: why (recorded with the skip)")
	}
	switch sub {
	case "list", "show", "replay", "skip":
	default:
		return &config.UsageError{Msg: fmt.Sprintf("unknown dlq subcommand %q (list, show, replay, skip)", sub)}
	}
	cfg, rest, err := config.LoadWithFlags("dlq "+sub, dlqUsage, tenantClientSettings, args[1:], env.getenv, apiClientDefaults(), env.stdout, flags)
	if err != nil {
		return err
	}
	cl, err := newAPIClient(cfg)
	if err != nil {
		return err
	}
	// The flags left empty are not sent.
	f := client.DeadLetterListParams{CorrelationID: orNil(corr), EndpointID: orNil(endpoint), Status: (*client.DeadLetterListParamsStatus)(orNil(status)), TenantID: cl.tenantID()}
	for _, tf := range []struct {
		flag, v string
		dst     **time.Time
	}{{"since", since, &f.Since}, {"until", until, &f.Until}} {
		if tf.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, tf.v)
		if err != nil {
			return &config.UsageError{Msg: "--" + tf.flag + " must be an RFC 3339 time such as 2026-11-29T18:00:00Z"}
		}
		*tf.dst = &t
	}
	one := func() (string, error) {
		if len(rest) != 1 {
			return "", &config.UsageError{Msg: "dlq " + sub + " takes exactly one event id"}
		}
		return rest[0], nil
	}

	switch sub {
	case "list":
		items, err := cl.DeadLetterListAll(ctx, f)
		if err != nil {
			return cl.fail(err)
		}
		if asJSON {
			return printJSON(env.stdout, items)
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT\tCORRELATION\tSEQ\tENDPOINT\tSTATUS\tATTEMPTS\tDEAD-LETTERED\tREASON")
		for _, d := range items {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", d.EventID, d.CorrelationID, d.Sequence, d.EndpointID, d.Status,
				d.AttemptCount, d.DeadLetteredAt.Local().Format(time.DateTime), truncate(d.Reason, 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "%d dead letter(s)\n", len(items))
		return nil
	case "show":
		id, err := one()
		if err != nil {
			return err
		}
		r, err := cl.DeadLetterGetWithResponse(ctx, id, &client.DeadLetterGetParams{EndpointID: orNil(endpoint), TenantID: cl.tenantID()})
		if err != nil {
			return cl.fail(err)
		}
		d := r.JSON200
		if asJSON {
			return printJSON(env.stdout, d)
		}
		// The reason and the attempts' errors are a receiver's words, the
		// envelope a producer's: every control character is escaped
		// (printable), so none of them can drive the operator's terminal.
		fmt.Fprintf(env.stdout, "event        %s\ncorrelation  %s  sequence %d\nendpoint     %s\nstatus       %s (replays %d)\nreason       %s\ndead-letter  %s\n",
			d.EventID, d.CorrelationID, d.Sequence, d.EndpointID, d.Status, d.ReplayCount, printable.String(d.Reason), d.DeadLetteredAt.Local().Format(time.RFC3339))
		if d.SkippedBy != "" {
			fmt.Fprintf(env.stdout, "skipped by   %s at %s: %s\n", printable.String(d.SkippedBy), d.SkippedAt.Local().Format(time.RFC3339), printable.String(d.SkipNote))
		}
		fmt.Fprintf(env.stdout, "envelope     %s\nattempts:\n", printable.JSON(d.Envelope))
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tSTARTED\tSTATUS\tLATENCY\tOUTCOME\tERROR")
		for _, a := range d.Attempts {
			code := "-"
			if a.StatusCode != 0 {
				code = fmt.Sprint(a.StatusCode)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%dms\t%s\t%s\n", a.Attempt, a.StartedAt.Local().Format(time.TimeOnly), code, a.LatencyMS, a.Outcome, truncate(a.Error, 60))
		}
		return tw.Flush()
	case "replay":
		if all {
			if len(rest) != 0 {
				return &config.UsageError{Msg: "dlq replay --all takes filters, not an event id"}
			}
			r, err := cl.DeadLetterReplayBatchWithResponse(ctx, &client.DeadLetterReplayBatchParams{
				CorrelationID: f.CorrelationID, EndpointID: f.EndpointID, Since: f.Since, Until: f.Until, TenantID: cl.tenantID(),
			})
			if err != nil {
				return cl.fail(err)
			}
			res := r.JSON202
			if asJSON {
				return printJSON(env.stdout, res)
			}
			fmt.Fprintf(env.stdout, "replaying %d dead letter(s)\n", res.Replayed)
			for _, id := range res.EventIDs {
				fmt.Fprintln(env.stdout, "  "+id)
			}
			return nil
		}
		id, err := one()
		if err != nil {
			return err
		}
		r, err := cl.DeadLetterReplayWithResponse(ctx, id, &client.DeadLetterReplayParams{TenantID: cl.tenantID()}, client.Operator{EndpointID: endpoint})
		if err != nil {
			return cl.fail(err)
		}
		res := *r.JSON202
		fmt.Fprintf(env.stdout, "replaying %s to %s (a fresh recovery window)\n", id, res.EndpointID)
		unconfirmed(env, res)
		return nil
	default: // skip
		id, err := one()
		if err != nil {
			return err
		}
		if strings.TrimSpace(note) == "" {
			return &config.UsageError{Msg: "dlq skip needs --note saying why"}
		}
		r, err := cl.DeadLetterSkipWithResponse(ctx, id, &client.DeadLetterSkipParams{TenantID: cl.tenantID()}, client.Operator{EndpointID: endpoint, Note: note})
		if err != nil {
			return cl.fail(err)
		}
		res := *r.JSON202
		fmt.Fprintf(env.stdout, "skipping %s at %s; its lane's successors will be delivered\n", id, res.EndpointID)
		unconfirmed(env, res)
		return nil
	}
}

// unconfirmed tells the operator that an action stands although its signal
// may not have arrived, and that it needs no second try.
func unconfirmed(env *cliEnv, res client.OperatorAction) {
	if res.SignalUnconfirmed {
		fmt.Fprintf(env.stderr, "note: %s\n", res.Detail)
	}
}

// printJSON prints v as indented JSON with every control character
// escaped: encoding/json leaves DEL, C1 controls and format characters as
// they are.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", printable.JSON(b))
	return err
}

// truncate is s on one line, control characters escaped, cut to n
// characters.
func truncate(s string, n int) string {
	s = printable.String(strings.Join(strings.Fields(s), " "))
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// orNil is a flag's value as a query parameter: nil, not sent, when empty.
func orNil(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}
