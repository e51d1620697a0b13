//go:build !deploy

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/localpg"
)

// runAsHookflow makes the test binary behave as the hookflow binary (see
// TestMain), so that TestReadmeTour can start `hookflow dev` as a process of
// its own, as a reader does with `make run`, and stop it with Ctrl-C's signal.
const runAsHookflow = "HOOKFLOW_TEST_RUN_AS_HOOKFLOW"

// TestReadmeTour runs the README's five-minute tour as a newcomer pastes it:
// every ```sh block of the section "## A five-minute tour", in order, in one
// bash session, against a real `hookflow dev` (its own Postgres, the embedded
// Temporal server, the API, a worker and the reference receiver). Then, on
// the same stack, the runnable blocks of docs/api.md and docs/portal.md,
// each page in a bash session of its own, a subtest per section.
//
// The blocks name the default ports (API localhost:8080, receiver :8090,
// NATS localhost:4222).
// Other tests and people use this machine at the same time, so dev runs on
// free ports instead and the test rewrites those two addresses in each block
// before it runs it; nothing else in a block is changed. The session defines
// curl as itself followed by a newline, so that each answer is a line of the
// block's output (a shell prints curl's answers run together).
//
// What is checked is what the text says a block prints: every "key":value
// fragment in a block's comments must appear in its output, and each block's
// check below asserts what the prose around it says. A block that only reads
// (no POST, PATCH, PUT or DELETE) is run again until its checks pass, for at
// most a minute, so a machine a minute behind makes it slower, not red; a
// block that writes runs once.
//
// Left out, and why: the README's quick start is `make run`, the stack this
// test starts itself, and `make test`, the suite this test is part of.
// docs/api.md's `hookflow status` block (indented in a list, so in no
// section's blocks) runs the CLI, not curl: it would need this binary
// standing in for hookflow on the shell's PATH, and checks of the CLI's
// tables. docs/operability.md's blocks start a `hookflow dev` of their own
// (with tracing), and load a store with 50,000 events to print its query
// plans (a store benchmark, `go test -bench`, not a request to hookflow);
// docs/performance.md's and docs/reliability.md's are the bench, chaos and
// model runs, minutes to hours each on stacks of their own, which `make test`
// runs in their short forms. TestEveryDocsBlockIsRunOrLeftOut holds every
// page to one or the other.
func TestReadmeTour(t *testing.T) {
	dev := startDev(t)
	t.Run("README", func(t *testing.T) {
		runPage(t, page{file: "../../README.md", leftOut: []string{"## Quick start"},
			sections: []docSection{{"## A five-minute tour", tourChecks()}}}, dev)
	})
	// The API guide's examples use T and J as the tour sets them; its
	// tenants walk-through makes the Acme the portal's blocks act on.
	t.Run("docs/api.md", func(t *testing.T) {
		runPage(t, page{file: "../../docs/api.md", sections: apiChecks(),
			setup: `T='Authorization: Bearer dev-token'; J='Content-Type: application/json'`}, dev)
	})
	t.Run("docs/portal.md", func(t *testing.T) {
		runPage(t, page{file: "../../docs/portal.md", sections: portalChecks()}, dev)
	})
}

// page is a document whose sections the test runs.
type page struct {
	file string
	// setup is what the page says its blocks take from elsewhere; the page
	// must quote it, and it runs first.
	setup    string
	sections []docSection
	// leftOut are the headings whose blocks are not run (TestReadmeTour
	// says why); every other sh block of the page must be in sections.
	leftOut []string
}

// docSection is a heading and a check for each of its sh blocks.
type docSection struct {
	heading string
	checks  []tourCheck
}

// runPage runs a page's sections in order in one bash session, as a reader
// pastes a page into one terminal: a later section may use what an earlier
// one set, so the first to fail ends the page.
func runPage(t *testing.T, pg page, dev devAddrs) {
	raw, err := os.ReadFile(pg.file)
	require.NoError(t, err)
	doc := string(raw)
	counted := 0
	for _, h := range pg.leftOut {
		counted += len(blocksOf(sectionOf(t, doc, h)))
	}
	for _, s := range pg.sections {
		counted += len(blocksOf(sectionOf(t, doc, s.heading)))
	}
	require.Equal(t, len(blocksOf(doc)), counted,
		"%s has sh blocks in a section the test neither runs nor leaves out: run it, or say why not", pg.file)
	sh := startShell(t)
	if pg.setup != "" {
		require.Contains(t, doc, pg.setup, "%s no longer says its blocks use this", pg.file)
		require.Empty(t, sh.run(t, pg.setup))
	}
	vars := map[string]string{}
	for _, s := range pg.sections {
		if !t.Run(strings.TrimPrefix(s.heading, "## "), func(t *testing.T) {
			runSection(t, sh, pg.file, doc, s, vars, dev)
		}) {
			return
		}
	}
}

// runSection runs a section's blocks in the page's bash session and checks
// each one's output.
func runSection(t *testing.T, sh *shell, file, doc string, s docSection, vars map[string]string, dev devAddrs) {
	blocks := blocksOf(sectionOf(t, doc, s.heading))
	require.NotEmpty(t, blocks, "section %q has no ```sh block", s.heading)
	require.Len(t, blocks, len(s.checks), "a check for each sh block of %s %q: add one for a new block", file, s.heading)
	for i, b := range blocks {
		script := forPorts(t, b, dev)
		deadline := time.Now().Add(time.Minute)
		for attempt := 1; ; attempt++ {
			out := sh.run(t, script)
			problems := fragmentProblems(b, out)
			if len(problems) == 0 {
				problems = s.checks[i](out, vars)
			}
			if len(problems) == 0 {
				t.Logf("block %d passed (attempt %d):\n%s", i+1, attempt, out)
				break
			}
			if !readOnly(b) || time.Now().After(deadline) {
				t.Fatalf("%s, block %d of %q, does not print what its text says:\n%s\n--- block:\n%s\n--- output:\n%s",
					file, i+1, s.heading, strings.Join(problems, "\n"), b, out)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// apiChecks: the API guide's examples, in the page's order. Each endpoint
// made answers 201 with its settings (the comments' fragments) and its
// secret, shown once.
func apiChecks() []docSection {
	return []docSection{
		{"## Delivery settings", []tourCheck{func(out string, _ map[string]string) []string {
			var p problems
			if lines := jsonLines(&p, out, 1); p == nil {
				newEndpoint(&p, lines[0])
				p.equal("headers", map[string]any{"Authorization": "********"}, lines[0]["headers"])
				if strings.Contains(out, "rcv_123") {
					p = append(p, "the header's value is shown")
				}
			}
			return p
		}}},
		{"## Circuit breaker, automatic recovery, auto-disable", []tourCheck{oneNewEndpoint, oneNewEndpoint}},
		// The cap is the default until the PATCH sets it.
		{"## A slow receiver", []tourCheck{func(out string, _ map[string]string) []string {
			var p problems
			lines := jsonLines(&p, out, 2)
			if p != nil {
				return p
			}
			if id, _ := lines[0]["id"].(string); !strings.HasPrefix(id, "ep_") {
				p = append(p, fmt.Sprintf("$EP is not an endpoint: %v", lines[0]))
			}
			p.equal("the PATCH's endpoint", lines[0]["id"], lines[1]["id"])
			p.equal("max_in_flight before", 100.0, lines[0]["max_in_flight"])
			p.equal("max_in_flight after", 4.0, lines[1]["max_in_flight"])
			return p
		}}},
		{"## Operational events", []tourCheck{oneNewEndpoint}},
		{"## Serving your customers: tenants", tenantChecks()},
	}
}

func oneNewEndpoint(out string, _ map[string]string) []string {
	var p problems
	if lines := jsonLines(&p, out, 1); p == nil {
		newEndpoint(&p, lines[0])
	}
	return p
}

// newEndpoint: ep is an endpoint just made, with its secret.
func newEndpoint(p *problems, ep map[string]any) {
	id, _ := ep["id"].(string)
	secret, _ := ep["secret"].(string)
	if !strings.HasPrefix(id, "ep_") || !strings.HasPrefix(secret, "whsec_") {
		*p = append(*p, fmt.Sprintf("not a new endpoint with its secret: %v", ep))
	}
}

// portalChecks: a session of acme's opened, its link exchanged once, its
// token confined to acme, then revoked; the page framed only by acme's
// origin.
func portalChecks() []docSection {
	return []docSection{
		{"## Portal sessions", []tourCheck{
			func(out string, vars map[string]string) []string {
				var p problems
				lines := jsonLines(&p, out, 2)
				if p != nil {
					return p
				}
				id, _ := lines[0]["id"].(string)
				if !regexp.MustCompile(`^ps_[a-z0-9_-]+$`).MatchString(id) {
					p = append(p, fmt.Sprintf("not a session: %v", lines[0]))
				}
				vars["SID"] = id
				link, _ := lines[0]["url"].(string)
				if !regexp.MustCompile(`^http://[0-9.:]+/portal/acme/#code=pc_[A-Za-z0-9_-]+$`).MatchString(link) {
					p = append(p, fmt.Sprintf("not a link to acme's portal on the API's address: %q", link))
				}
				problemOf(&p, lines[1], 401, "portal-link-used")
				return p
			},
			func(out string, _ map[string]string) []string {
				var p problems
				lines := jsonLines(&p, out, 2)
				if p != nil {
					return p
				}
				p.equal("capabilities", []any{"view", "dead-letters:write"}, lines[0]["capabilities"])
				p.equal("scopes", []any{"events:read", "dead-letters:write"}, lines[0]["scopes"])
				if lines[0]["expires_at"] == nil {
					p = append(p, "no expires_at")
				}
				var dls []string
				for _, dl := range asSlice(lines[1]["items"]) {
					dls = append(dls, fmt.Sprint(dl["event_id"]))
				}
				p.equal("the session's dead letters", []string{"evt-1"}, dls)
				return p
			},
			func(out string, vars map[string]string) []string {
				var p problems
				lines := jsonLines(&p, out, 3)
				if p != nil {
					return p
				}
				p.equal("revoked session", vars["SID"], lines[0]["id"])
				if lines[0]["revoked_at"] == nil {
					p = append(p, "no revoked_at")
				}
				problemOf(&p, lines[1], 401, "portal-session-revoked")
				return p
			},
		}},
		{"## The page", []tourCheck{
			// The PUT keeps acme's limits and adds its origin.
			func(out string, _ map[string]string) []string {
				var p problems
				if lines := jsonLines(&p, out, 1); p == nil {
					p.equal("tenant", "acme", lines[0]["id"])
					p.equal("events_per_second", 100.0, field(lines[0], "limits", "events_per_second"))
					p.equal("max_endpoints", 20.0, field(lines[0], "limits", "max_endpoints"))
				}
				return p
			},
			func(out string, _ map[string]string) []string {
				var p problems
				p.equal("frame-ancestors of acme's origin, another, an unknown tenant",
					"frame-ancestors 'self' https://app.acme.example\nframe-ancestors 'self'\nframe-ancestors 'self'", out)
				return p
			},
		}},
	}
}

// problemOf: prob is a problem of status and type kind.
func problemOf(p *problems, prob map[string]any, status int, kind string) {
	p.equal("status", float64(status), prob["status"])
	if typ, _ := prob["type"].(string); !strings.HasSuffix(typ, "/"+kind) {
		*p = append(*p, fmt.Sprintf("problem type %q, not %s", typ, kind))
	}
}

// tenantChecks: acme and globex are made; acme's key registers an endpoint
// and publishes to it; globex's key sees none of it.
func tenantChecks() []tourCheck {
	return []tourCheck{
		func(out string, _ map[string]string) []string {
			var p problems
			if lines := jsonLines(&p, out, 2); p == nil {
				p.equal("tenants", "acme globex", fmt.Sprint(lines[0]["id"], " ", lines[1]["id"]))
			}
			return p
		},
		func(out string, vars map[string]string) []string {
			var p problems
			lines := jsonLines(&p, out, 2)
			if p != nil {
				return p
			}
			eps := endpointsOf(lines[0]["deliveries"])
			if p.equal("the event's deliveries", 1, len(eps)) {
				vars["EP"] = eps[0]
				var listed []string
				for _, ep := range asSlice(lines[1]["items"]) {
					listed = append(listed, fmt.Sprint(ep["id"]))
				}
				p.equal("acme's endpoints", eps, listed)
			}
			p.equal("event id", "evt-1", lines[0]["id"])
			return p
		},
		func(out string, _ map[string]string) []string {
			var p problems
			lines := strings.Split(out, "\n")
			if !p.equal("answers", 4, len(lines)) {
				return p
			}
			p.equal("globex reads acme's endpoint", "404", lines[0])
			p.equal("globex reads acme's event", "404", lines[1])
			p.equal("globex's listing", `{"items":[]}`, lines[2])
			var prob map[string]any
			if json.Unmarshal([]byte(lines[3]), &prob) != nil {
				return append(p, fmt.Sprintf("not a problem: %q", lines[3]))
			}
			p.equal("globex names acme", 404.0, prob["status"])
			return p
		},
	}
}

// tourCheck returns what is wrong with a block's output, nothing when it says
// what the README says it says. vars carries what a block learned ($EP).
type tourCheck func(out string, vars map[string]string) []string

func tourChecks() []tourCheck {
	return []tourCheck{
		// The failing endpoint's ID, in $EP for every later block.
		func(out string, vars map[string]string) []string {
			ep := strings.TrimSpace(out)
			if !regexp.MustCompile(`^ep_[a-z0-9]+$`).MatchString(ep) {
				return []string{fmt.Sprintf("echo \"$EP\" printed %q, not an endpoint ID", ep)}
			}
			vars["EP"] = ep
			return nil
		},
		// 3 and 2 wait at both endpoints; 1 missing holds every lane.
		func(out string, vars map[string]string) []string {
			var p problems
			lines := jsonLines(&p, out, 3)
			if p != nil {
				return p
			}
			both := []string{"ep_dev_receiver", vars["EP"]}
			slices.Sort(both)
			for _, ev := range lines[:2] {
				p.equal("state", "waiting", ev["state"])
				p.equal("deliveries", both, endpointsOf(ev["deliveries"]))
			}
			p.equal("missing", 1.0, lines[2]["missing"])
			lanes := lanesOf(lines[2])
			p.equal("lanes", both, sortedKeys(lanes))
			for ep, l := range lanes {
				p.equal(ep+" parked", []any{2.0, 3.0}, l["parked"])
				p.equal(ep+" blocked_by.state", "missing", field(l, "blocked_by", "state"))
			}
			return p
		},
		// 1 arrives.
		func(out string, _ map[string]string) []string {
			var p problems
			if lines := jsonLines(&p, out, 1); p == nil {
				p.equal("deliveries", 2, len(endpointsOf(lines[0]["deliveries"])))
			}
			return p
		},
		// A second later: the receiver applied 1, 2, 3; $EP's lane waits on
		// 1's dead letter with 2 and 3 parked; the dead letter and the event
		// say why.
		func(out string, vars map[string]string) []string {
			var p problems
			lines := jsonLines(&p, out, 4)
			if p != nil {
				return p
			}
			p.equal("receiver applied", []any{"order-7-1", "order-7-2", "order-7-3"}, lines[0]["applied"])
			lanes := lanesOf(lines[1])
			p.equal("next_sequence", 1.0, lines[1]["next_sequence"])
			p.equal("ep_dev_receiver previous_sequence", 3.0, lanes["ep_dev_receiver"]["previous_sequence"])
			ep := lanes[vars["EP"]]
			p.equal("$EP released", 1.0, ep["released"])
			p.equal("$EP parked", []any{2.0, 3.0}, ep["parked"])
			p.equal("$EP blocked_by.state", "dead_lettered", field(ep, "blocked_by", "state"))
			items, _ := lines[2]["items"].([]any)
			if p.equal("dead letters", 1, len(items)) {
				dl, _ := items[0].(map[string]any)
				p.equal("dead letter event_id", "order-7-1", dl["event_id"])
				p.equal("dead letter endpoint_id", vars["EP"], dl["endpoint_id"])
				if r, _ := dl["reason"].(string); !strings.HasPrefix(r, "permanent rejection: receiver answered 401") {
					p = append(p, fmt.Sprintf("dead letter reason %q", r))
				}
			}
			p.equal("event state", "dead_lettered", lines[3]["state"])
			states := map[string]any{}
			for _, d := range asSlice(lines[3]["deliveries"]) {
				states[fmt.Sprint(d["endpoint_id"])] = d["state"]
			}
			p.equal("event deliveries", map[string]any{"ep_dev_receiver": "delivered", vars["EP"]: "dead_lettered"}, states)
			return p
		},
		// The skip is accepted for $EP's delivery.
		func(out string, vars map[string]string) []string {
			var p problems
			if lines := jsonLines(&p, out, 1); p == nil {
				p.equal("endpoint_id", vars["EP"], lines[0]["endpoint_id"])
				p.equal("event_id", "order-7-1", lines[0]["event_id"])
			}
			return p
		},
		// Only $EP's lane moved: 1 skipped, 2 released, 3 parked; 1 is
		// finished in every lane, so the correlation's cursor is 2.
		func(out string, vars map[string]string) []string {
			var p problems
			lines := jsonLines(&p, out, 1)
			if p != nil {
				return p
			}
			p.equal("next_sequence", 2.0, lines[0]["next_sequence"])
			lanes := lanesOf(lines[0])
			ep := lanes[vars["EP"]]
			p.equal("$EP skipped", []any{1.0}, ep["skipped"])
			p.equal("$EP released", 2.0, ep["released"])
			p.equal("$EP parked", []any{3.0}, ep["parked"])
			p.equal("ep_dev_receiver parked", []any{}, lanes["ep_dev_receiver"]["parked"])
			return p
		},
		// $EP disabled.
		func(out string, vars map[string]string) []string {
			var p problems
			if lines := jsonLines(&p, out, 1); p == nil {
				p.equal("id", vars["EP"], lines[0]["id"])
			}
			return p
		},
		// A NATS endpoint: its URL is the canonical address of its config.
		func(out string, vars map[string]string) []string {
			var p problems
			lines := jsonLines(&p, out, 1)
			if p != nil {
				return p
			}
			p.equal("type", "nats", lines[0]["type"])
			if u, _ := lines[0]["url"].(string); !strings.HasSuffix(u, "/dev.invoices") {
				p = append(p, fmt.Sprintf("url %q", u))
			}
			vars["NATS"] = fmt.Sprint(lines[0]["id"])
			return p
		},
		// Its lane of inv-9 took 2 after 1, as the receiver's did.
		func(out string, vars map[string]string) []string {
			var p problems
			lines := jsonLines(&p, out, 1)
			if p != nil {
				return p
			}
			states := map[string]any{}
			for _, d := range asSlice(lines[0]["deliveries"]) {
				states[fmt.Sprint(d["endpoint_id"])] = d["state"]
			}
			p.equal("inv-9-2 deliveries", map[string]any{"ep_dev_receiver": "delivered", vars["NATS"]: "delivered"}, states)
			return p
		},
		// The NATS endpoint's filter leaves inv-9-3 out of its lane and
		// takes inv-9-4.
		func(out string, vars map[string]string) []string {
			var p problems
			lines := jsonLines(&p, out, 2)
			if p != nil {
				return p
			}
			for i, want := range []struct {
				to, out []any
			}{{[]any{"ep_dev_receiver"}, []any{vars["NATS"]}}, {[]any{"ep_dev_receiver", vars["NATS"]}, nil}} {
				var to []any
				for _, d := range asSlice(lines[i]["deliveries"]) {
					to = append(to, d["endpoint_id"])
				}
				slices.SortFunc(to, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
				slices.SortFunc(want.to, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
				p.equal(fmt.Sprintf("inv-9-%d deliveries", i+3), want.to, to)
				filtered, _ := lines[i]["filtered_out"].([]any)
				p.equal(fmt.Sprintf("inv-9-%d filtered_out", i+3), want.out, filtered)
			}
			return p
		},
	}
}

// sectionOf returns the section of doc that starts with heading, up to the
// next heading of its level.
func sectionOf(t *testing.T, doc, heading string) string {
	t.Helper()
	start := strings.Index(doc, "\n"+heading+"\n")
	require.GreaterOrEqual(t, start, 0, "no section %q", heading)
	section := doc[start+len(heading)+2:]
	level := heading[:strings.Index(heading, " ")+1]
	if end := strings.Index(section, "\n"+level); end >= 0 {
		section = section[:end]
	}
	return section
}

// blocksOf returns the ```sh blocks of text (one indented in a list is not
// one).
func blocksOf(text string) []string {
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)\n```\n").FindAllStringSubmatch("\n"+text, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// forPorts points a block at the dev stack this test started.
func forPorts(t *testing.T, block string, dev devAddrs) string {
	t.Helper()
	s := strings.NewReplacer("localhost:8080", dev.api, "127.0.0.1:8090", dev.receiver, "localhost:8090", dev.receiver,
		"localhost:4222", dev.nats).Replace(block)
	require.NotRegexp(t, `:(80[89]0|4222)\b`, s, "a block names a port the test does not rewrite")
	return s
}

// readOnly: a block that changes nothing, safe to run again while hookflow
// catches up.
func readOnly(block string) bool {
	return !regexp.MustCompile(`-X(POST|PATCH|PUT|DELETE)|\bpost \d`).MatchString(block)
}

var (
	// A comment after a command, or a line of its own (one that tells
	// what a command of several lines printed).
	commentRE  = regexp.MustCompile(`(?:^|\s{2,})# (.*)$`)
	fragmentRE = regexp.MustCompile(`"[a-z_]+":(?:"[^"]*"|\[[^\]]*\]|-?\d+|true|false)`)
)

// fragmentProblems: each "key":value a block's comments quote must be in
// what the block printed.
func fragmentProblems(block, out string) []string {
	var p []string
	for _, line := range strings.Split(block, "\n") {
		m := commentRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, f := range fragmentRE.FindAllString(m[1], -1) {
			if !strings.Contains(out, f) {
				p = append(p, fmt.Sprintf("the comment says %s; the output has no such thing", f))
			}
		}
	}
	return p
}

type problems []string

func (p *problems) equal(what string, want, got any) bool {
	if fmt.Sprint(want) == fmt.Sprint(got) {
		return true
	}
	*p = append(*p, fmt.Sprintf("%s: want %v, got %v", what, want, got))
	return false
}

// jsonLines decodes each line of out as a JSON object; there must be n.
func jsonLines(p *problems, out string, n int) []map[string]any {
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			*p = append(*p, fmt.Sprintf("not a JSON object: %q", l))
			return nil
		}
		lines = append(lines, m)
	}
	if len(lines) != n {
		*p = append(*p, fmt.Sprintf("want %d answers, got %d", n, len(lines)))
		return nil
	}
	return lines
}

func asSlice(v any) []map[string]any {
	var out []map[string]any
	xs, _ := v.([]any)
	for _, x := range xs {
		m, _ := x.(map[string]any)
		out = append(out, m)
	}
	return out
}

func endpointsOf(deliveries any) []string {
	var eps []string
	for _, d := range asSlice(deliveries) {
		eps = append(eps, fmt.Sprint(d["endpoint_id"]))
	}
	slices.Sort(eps)
	return eps
}

func lanesOf(correlation map[string]any) map[string]map[string]any {
	lanes := map[string]map[string]any{}
	for _, l := range asSlice(correlation["lanes"]) {
		lanes[fmt.Sprint(l["endpoint_id"])] = l
	}
	return lanes
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func field(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// shell is one bash session: the tour's blocks share its variables ($T, $J,
// $EP) and functions (post), as they do in a reader's terminal.
type shell struct {
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *syncBuffer
	n      int
}

func startShell(t *testing.T) *shell {
	t.Helper()
	cmd := exec.Command("bash", "--norc", "--noprofile")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	sh := &shell{in: in, out: bufio.NewReader(out), stderr: &syncBuffer{}}
	cmd.Stderr = sh.stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	_, err = io.WriteString(in, "curl() { command curl --max-time 30 \"$@\"; echo; }\n")
	require.NoError(t, err)
	return sh
}

// run runs a script in the session and returns what it printed; anything on
// standard error (a sed that does not parse, a command not found) fails the
// test.
func (sh *shell) run(t *testing.T, script string) string {
	t.Helper()
	sh.n++
	mark := fmt.Sprintf("--- end of block %d ---", sh.n)
	_, err := fmt.Fprintf(sh.in, "%s\nprintf '\\n%%s\\n' '%s'\n", script, mark)
	require.NoError(t, err)
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := sh.out.ReadString('\n')
			if err != nil {
				done <- result{b.String(), err}
				return
			}
			if strings.TrimSuffix(line, "\n") == mark {
				done <- result{b.String(), nil}
				return
			}
			b.WriteString(line)
		}
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err, "the shell ended: %s", sh.stderr.String())
		require.Empty(t, sh.stderr.take(), "the block wrote to standard error:\n%s", script)
		// Blank lines are the mark's own, or an empty answer's.
		var lines []string
		for _, l := range strings.Split(r.out, "\n") {
			if strings.TrimSpace(l) != "" {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	case <-time.After(3 * time.Minute):
		t.Fatalf("the block did not finish in 3 minutes:\n%s", script)
		return ""
	}
}

// startDev runs this test binary as `hookflow dev` on free ports and a data
// folder of its own, and waits for its banner; the test's end stops it as
// Ctrl-C does. It returns the addresses it serves.
// devAddrs are the host:port of the dev stack's API, reference receiver
// and NATS server.
type devAddrs struct{ api, receiver, nats string }

func startDev(t *testing.T) devAddrs {
	t.Helper()
	// Not t.TempDir: as root, Postgres runs as the postgres user, which must
	// reach the folder (t.TempDir's parent is 0700).
	dir, err := os.MkdirTemp("", "hookflow-readme-tour-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	ports := freePorts(t, 6)
	api, receiver := "127.0.0.1:"+ports[0], "127.0.0.1:"+ports[1]
	cmd := exec.Command(os.Args[0], "dev")
	cmd.Env = append(os.Environ(), runAsHookflow+"=1",
		"HOOKFLOW_DATA_DIR="+dir,
		"HOOKFLOW_API_ADDR="+api,
		"HOOKFLOW_RECEIVER_ADDR="+receiver,
		"HOOKFLOW_DEV_TEMPORAL_PORT="+ports[2],
		"HOOKFLOW_DEV_POSTGRES_PORT="+ports[3],
		"HOOKFLOW_METRICS_ADDR=127.0.0.1:"+ports[4],
		"HOOKFLOW_DEV_NATS_PORT="+ports[5],
		"HOOKFLOW_DEV_UI_PORT=0", // the tour's Web UI steps are prose, not blocks
	)
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("hookflow dev's output:\n%s\n%s", stdout.String(), stderr.String())
		}
	})
	deadline := time.After(5 * time.Minute)
	for !strings.Contains(stdout.String(), "hookflow dev is up") {
		select {
		case <-exited:
			t.Fatalf("hookflow dev exited (%v):\n%s\n%s", waitErr, stdout.String(), stderr.String())
		case <-deadline:
			t.Fatalf("hookflow dev did not start in 5 minutes:\n%s\n%s", stdout.String(), stderr.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return devAddrs{api: api, receiver: receiver, nats: "127.0.0.1:" + ports[5]}
}

// freePorts picks n free ports below 32768, since Temporal stores its ports
// as smallint.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ports []string
	for len(ports) < n {
		p, err := localpg.FreeLowPort()
		require.NoError(t, err)
		if s := strconv.Itoa(p); !slices.Contains(ports, s) {
			ports = append(ports, s)
		}
	}
	return ports
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// take returns what was written since the last take.
func (s *syncBuffer) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.b.String()
	s.b.Reset()
	return out
}

// TestEveryDocsBlockIsRunOrLeftOut: every page of the README and docs/
// with a ```sh block is either run by TestReadmeTour (which holds each of
// its sections to a check, or to a heading it leaves out) or left out here
// as a whole, with the reason; a new page with blocks, or blocks on a page
// that had none, fails until it is one or the other.
func TestEveryDocsBlockIsRunOrLeftOut(t *testing.T) {
	t.Parallel()
	run := map[string]bool{"../../README.md": true, "../../docs/api.md": true, "../../docs/portal.md": true}
	leftOut := map[string]string{
		"../../docs/operability.md": "its blocks start a hookflow dev of their own (with tracing) and run a store benchmark",
		"../../docs/performance.md": "the bench's runs, minutes to hours on stacks of their own",
		"../../docs/reliability.md": "the chaos, operator-model and model runs, minutes to hours on stacks of their own",
	}
	pages, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	pages = append(pages, "../../README.md")
	for _, p := range pages {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		n := len(blocksOf(string(raw)))
		_, out := leftOut[p]
		switch {
		case run[p] || out:
			require.Positive(t, n, "%s has no sh block any more: take it off this test's lists", p)
		default:
			require.Zero(t, n, "%s has %d sh blocks that no test runs: run them in TestReadmeTour, or leave the page out here and say why", p, n)
		}
	}
}
