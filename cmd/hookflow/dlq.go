package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/store"
)

var apiClientSettings = []string{"HOOKFLOW_API_URL", "HOOKFLOW_API_TOKEN"}

// apiClientDefaults makes the CLI's API commands talk to hookflow dev as it
// is; set HOOKFLOW_API_TOKEN to an API key (or the bootstrap token) for any
// other API.
func apiClientDefaults() map[string]string { return map[string]string{"HOOKFLOW_API_TOKEN": devToken} }

const dlqUsage = `usage: hookflow dlq <list|show|replay|skip> [flags]

  list   [--correlation-id ID] [--endpoint-id ID] [--since T] [--until T] [--status open|replayed|skipped|all] [--json]
  show   <event id> [--json]
  replay <event id>                     replay one dead letter (a fresh recovery window)
  replay --all [filters of list]        replay every open match, in sequence order per correlation
  skip   <event id> --note TEXT         give it up; its successors go on

Talks to the API at HOOKFLOW_API_URL with HOOKFLOW_API_TOKEN.`

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
		fs.StringVar(&endpoint, "endpoint-id", "", "only this endpoint")
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
	cfg, rest, err := config.LoadWithFlags("dlq "+sub, dlqUsage, apiClientSettings, args[1:], env.getenv, apiClientDefaults(), env.stdout, flags)
	if err != nil {
		return err
	}
	cl := apiClient{base: strings.TrimRight(cfg.APIURL, "/"), token: cfg.APIToken}
	q := url.Values{}
	for k, v := range map[string]string{"correlation_id": corr, "endpoint_id": endpoint, "since": since, "until": until, "status": status} {
		if v != "" {
			q.Set(k, v)
		}
	}
	one := func() (string, error) {
		if len(rest) != 1 {
			return "", &config.UsageError{Msg: "dlq " + sub + " takes exactly one event id"}
		}
		return rest[0], nil
	}
	body := map[string]string{}

	switch sub {
	case "list":
		var items []store.DeadLetter
		for cursor := ""; ; {
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var page struct {
				Items      []store.DeadLetter `json:"items"`
				NextCursor string             `json:"next_cursor"`
			}
			if err := cl.do(ctx, http.MethodGet, "/v1/dead-letters?"+q.Encode(), nil, &page); err != nil {
				return err
			}
			items = append(items, page.Items...)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if asJSON {
			return printJSON(env.stdout, items)
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT\tCORRELATION\tSEQ\tENDPOINT\tSTATUS\tATTEMPTS\tDEAD-LETTERED\tREASON")
		for _, d := range items {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", d.EventID, d.CorrelationID, d.Sequence, d.EndpointID, d.Status,
				len(d.Attempts), d.DeadLetteredAt.Local().Format(time.DateTime), truncate(d.Reason, 60))
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
		var d store.DeadLetter
		if err := cl.do(ctx, http.MethodGet, "/v1/dead-letters/"+url.PathEscape(id), nil, &d); err != nil {
			return err
		}
		if asJSON {
			return printJSON(env.stdout, d)
		}
		fmt.Fprintf(env.stdout, "event        %s\ncorrelation  %s  sequence %d\nendpoint     %s\nstatus       %s (replays %d)\nreason       %s\ndead-letter  %s\n",
			d.EventID, d.CorrelationID, d.Sequence, d.EndpointID, d.Status, d.ReplayCount, d.Reason, d.DeadLetteredAt.Local().Format(time.RFC3339))
		if d.SkippedBy != nil {
			fmt.Fprintf(env.stdout, "skipped by   %s at %s: %s\n", *d.SkippedBy, d.SkippedAt.Local().Format(time.RFC3339), deref(d.SkipNote))
		}
		fmt.Fprintf(env.stdout, "envelope     %s\nattempts:\n", d.Envelope)
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tSTARTED\tSTATUS\tLATENCY\tOUTCOME\tERROR")
		for _, a := range d.Attempts {
			code := "-"
			if a.StatusCode != nil {
				code = fmt.Sprint(*a.StatusCode)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%dms\t%s\t%s\n", a.Attempt, a.StartedAt.Local().Format(time.TimeOnly), code, a.LatencyMS, a.Outcome, truncate(deref(a.Error), 60))
		}
		return tw.Flush()
	case "replay":
		if all {
			if len(rest) != 0 {
				return &config.UsageError{Msg: "dlq replay --all takes filters, not an event id"}
			}
			var res struct {
				Replayed int      `json:"replayed"`
				EventIDs []string `json:"event_ids"`
			}
			if err := cl.do(ctx, http.MethodPost, "/v1/dead-letters/replay?"+q.Encode(), nil, &res); err != nil {
				return err
			}
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
		if err := cl.do(ctx, http.MethodPost, "/v1/dead-letters/"+url.PathEscape(id)+"/replay", body, nil); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "replaying %s (a fresh recovery window)\n", id)
		return nil
	default: // skip
		id, err := one()
		if err != nil {
			return err
		}
		if strings.TrimSpace(note) == "" {
			return &config.UsageError{Msg: "dlq skip needs --note saying why"}
		}
		body["note"] = note
		if err := cl.do(ctx, http.MethodPost, "/v1/dead-letters/"+url.PathEscape(id)+"/skip", body, nil); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "skipping %s; its successors will be delivered\n", id)
		return nil
	}
}

// apiClient calls hookflow's API and turns problem+json into one-line errors.
type apiClient struct {
	base, token string
}

func (c apiClient) do(ctx context.Context, method, path string, in, out any) error {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return &config.UsageError{Msg: "invalid HOOKFLOW_API_URL: " + err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := &http.Client{Timeout: 2 * time.Minute}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the API at %s (HOOKFLOW_API_URL): %w", c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read API answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		var p struct {
			Title  string `json:"title"`
			Detail string `json:"detail"`
		}
		if json.Unmarshal(raw, &p) == nil && p.Title != "" {
			if p.Detail != "" {
				return fmt.Errorf("%d %s: %s", resp.StatusCode, p.Title, p.Detail)
			}
			return fmt.Errorf("%d %s", resp.StatusCode, p.Title)
		}
		return fmt.Errorf("API answered %s", resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("decode API answer: %w", err)
		}
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
