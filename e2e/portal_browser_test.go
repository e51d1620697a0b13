package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/webhook"
)

// chromiumInstall is what to run when the browser is missing: the tests
// fail with it rather than skip (scripts/deps.sh --browser installs it).
const chromiumInstall = "apt-get install -y chromium (scripts/deps.sh --browser installs it, as make test runs it)"

// chromiumPath finds Debian's Chromium, or fails the test saying how to
// install it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("the portal's browser tests need Chromium, which is not installed: %s", chromiumInstall)
	return ""
}

// sentRequest is one request the browser sent, as DevTools reported it:
// its URL (without the fragment, which no request carries) and the
// headers that went on the wire (Referer among them).
type sentRequest struct {
	id      network.RequestID
	url     string
	method  string
	headers map[string]string
	frame   string
	body    string
}

// netLog records every request of every tab, and the loads that failed.
type netLog struct {
	mu       sync.Mutex
	requests map[network.RequestID]*sentRequest
	order    []network.RequestID
	failed   map[network.RequestID]string
}

func newNetLog() *netLog {
	return &netLog{requests: map[network.RequestID]*sentRequest{}, failed: map[network.RequestID]string{}}
}

func (n *netLog) req(id network.RequestID) *sentRequest {
	r, ok := n.requests[id]
	if !ok {
		r = &sentRequest{id: id, headers: map[string]string{}}
		n.requests[id] = r
		n.order = append(n.order, id)
	}
	return r
}

// add is the tabs' listener: it runs on each tab's reading goroutine.
func (n *netLog) add(ev any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		r := n.req(e.RequestID)
		r.url, r.method, r.frame = e.Request.URL, e.Request.Method, string(e.FrameID)
		for _, p := range e.Request.PostDataEntries {
			r.body += string(p.Bytes)
		}
		for k, v := range e.Request.Headers {
			r.headers[strings.ToLower(k)] = fmt.Sprint(v)
		}
	case *network.EventRequestWillBeSentExtraInfo:
		r := n.req(e.RequestID)
		for k, v := range e.Headers {
			r.headers[strings.ToLower(k)] = fmt.Sprint(v)
		}
	case *network.EventLoadingFailed:
		n.failed[e.RequestID] = e.ErrorText + " " + string(e.BlockedReason)
	}
}

func (n *netLog) all() []sentRequest {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]sentRequest, 0, len(n.order))
	for _, id := range n.order {
		r := *n.requests[id]
		r.headers = maps.Clone(r.headers)
		out = append(out, r)
	}
	return out
}

// failure is why the load of the request to url failed ("" while none
// did).
func (n *netLog) failure(rawURL string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, id := range n.order {
		if n.requests[id].url == rawURL {
			if f, ok := n.failed[id]; ok {
				return f
			}
		}
	}
	return ""
}

// browser is one headless Chromium for the test, its tabs recorded by log,
// each step's screenshot kept under dir.
type browser struct {
	t    *testing.T
	ctx  context.Context
	log  *netLog
	dir  string
	step int
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	dir, err := filepath.Abs(filepath.Join("..", "artifacts", "portal"))
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("portal screenshots: %s", dir)
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.Headless, chromedp.DisableGPU, chromedp.NoSandbox,
		chromedp.WindowSize(1280, 800), chromedp.Flag("no-first-run", true), chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.Flag("metrics-recording-only", true),
		chromedp.UserDataDir(t.TempDir())}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	log := newNetLog()
	bctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(log.add))
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(bctx), "start chromium (%s)", path)
	return &browser{t: t, ctx: bctx, log: log, dir: dir}
}

// tab opens a new tab, recorded like the first.
func (br *browser) tab() context.Context {
	ctx, cancel := chromedp.NewContext(br.ctx, chromedp.WithListener(br.log.add))
	br.t.Cleanup(cancel)
	require.NoError(br.t, chromedp.Do(ctx))
	return ctx
}

// do runs actions in tab, each bounded so that a page that never shows
// what is awaited fails the test with what it waited for.
func (br *browser) do(tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	br.t.Helper()
	ctx, cancel := context.WithTimeout(tab, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		br.shot(tab, "failed-"+what)
		br.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates expr in tab's page (awaiting a promise).
func eval[T any](br *browser, tab context.Context, expr string) T {
	br.t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	require.NoError(br.t, err, expr)
	return v
}

// waitText waits until the element sel of tab's page shows text.
func waitText(sel, text string) chromedp.Action[chromedp.Void] {
	js, _ := json.Marshal(sel)
	want, _ := json.Marshal(text)
	return chromedp.Poll[chromedp.Void](fmt.Sprintf(`(document.querySelector(%s)?.textContent ?? "").includes(%s)`, js, want),
		chromedp.WithPollingTimeout(0))
}

// shot keeps a screenshot of tab as the next step's PNG.
func (br *browser) shot(tab context.Context, name string) string {
	br.step++
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		br.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	p := filepath.Join(br.dir, fmt.Sprintf("%02d-%s.png", br.step, name))
	require.NoError(br.t, os.WriteFile(p, png, 0o644))
	return p
}

// href is tab's address.
func href(br *browser, tab context.Context) string {
	return eval[string](br, tab, `location.href`)
}

// orderReceiver records what one receiver took, in order, and refuses
// (400: a dead letter at once) the events in refuse while they are there.
type orderReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	took   []string
	sent   map[string]int
	refuse map[string]bool
	// signed is each event's last request, headers and body, for its
	// signature to be checked.
	signed map[string]signedRequest
}

// signedRequest is what a receiver verifies a delivery by.
type signedRequest struct {
	header http.Header
	body   []byte
}

func newOrderReceiver(t *testing.T) *orderReceiver {
	r := &orderReceiver{sent: map[string]int{}, refuse: map[string]bool{}, signed: map[string]signedRequest{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var env contract.Envelope
		if err != nil || json.Unmarshal(body, &env) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.sent[env.ID]++
		r.signed[env.ID] = signedRequest{header: req.Header.Clone(), body: body}
		if r.refuse[env.ID] {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.took = append(r.took, fmt.Sprintf("%s/%d", env.CorrelationID, env.Sequence))
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *orderReceiver) setRefuse(id string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refuse[id] = on
}

// of lists what it took of correlation, as sequences in arrival order.
func (r *orderReceiver) of(correlation string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.took {
		if c, seq, _ := strings.Cut(s, "/"); c == correlation {
			out = append(out, seq)
		}
	}
	return out
}

// verify checks the signature of the last request of event id with secret.
func (r *orderReceiver) verify(id, secret string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sr, ok := r.signed[id]
	if !ok {
		return fmt.Errorf("no request of %s", id)
	}
	return webhook.VerifyHeader([]string{secret}, sr.header, sr.body, time.Now(), 5*time.Minute)
}

// header is header name of the last request of event id.
func (r *orderReceiver) header(id, name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.signed[id].header.Get(name)
}

func (r *orderReceiver) requests(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent[id]
}

// framer is a page on an origin of its own that frames the portal link
// it is given (a SaaS's own application embedding the portal).
type framer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	link string
}

func newFramer(t *testing.T) *framer {
	f := &framer{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		f.mu.Lock()
		link := f.link
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>app</title><h3>The application</h3><iframe id="portal" width="1200" height="600" src="%s"></iframe>`, link)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *framer) frame(link string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.link = link
}

// TestPortalBrowser: the portal page, as its customer sees it, in a real
// headless Chromium against the real stack, every step kept as a
// screenshot under artifacts/portal/.
func TestPortalBrowser(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	b := setup(t, options{})
	ctx := context.Background()
	allowed, stranger := newFramer(t), newFramer(t)
	const acme, globex = "pbrowse-acme", "pbrowse-globex"
	require.Equal(t, http.StatusCreated, b.call(http.MethodPut, "/v1/tenants/"+acme, map[string]any{"name": "Acme",
		"portal_origins": []string{allowed.srv.URL}}, nil))
	var k struct {
		Key string `json:"key"`
	}
	require.Equal(t, http.StatusCreated, b.call(http.MethodPost, "/v1/api-keys", map[string]any{"name": "acme-backend", "tenant_id": acme,
		"scopes": []string{"events:write", "events:read"}}, &k))
	producer := k.Key
	g := b.newTenantSide(globex)
	rcv := newOrderReceiver(t)
	const actor, returnURL = "alice@acme.example", "https://app.acme.example/webhooks"
	var codes, tokens []string
	link := func(body map[string]any) portalLink {
		t.Helper()
		body["actor"], body["return_url"] = actor, returnURL
		l := b.openPortal(acme, body)
		require.True(t, strings.HasPrefix(l.URL, b.apiURL+"/portal/"+acme+"/#code="), l.URL)
		codes = append(codes, l.code(t))
		return l
	}
	publish := func(id, corr string, seq int64) {
		t.Helper()
		require.Equal(t, http.StatusAccepted, b.callAs(producer, http.MethodPost, "/v1/events", map[string]any{
			"id": id, "correlation_id": corr, "sequence": seq, "type": "order.updated", "data": map[string]any{"n": seq}}, nil))
	}
	everything := []string{"endpoints:manage", "endpoints:secret", "dead-letters:write", "events:test"}

	// The page's own headers: framed by the tenant's origin that embeds
	// it (its Referer) only, its own script only, no referrer.
	req, err := http.NewRequest(http.MethodGet, b.apiURL+"/portal/"+acme+"/", nil)
	require.NoError(t, err)
	req.Header.Set("Referer", allowed.srv.URL+"/")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	csp := resp.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "frame-ancestors 'self' "+allowed.srv.URL)
	require.Contains(t, csp, "default-src 'self'")
	require.Contains(t, csp, "script-src 'self';")
	require.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	resp, err = http.Get(b.apiURL + "/portal/" + globex + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.True(t, strings.HasSuffix(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'self'"), "no origins: only itself")
	// A tenant that does not exist is served alike (the page tells no one
	// which tenants exist); what is not the page is not found.
	for path, want := range map[string]int{"/portal/pbrowse-nosuch/": http.StatusOK, "/portal/" + acme + "/main.js": http.StatusOK,
		"/portal/" + acme + "/index.html": http.StatusNotFound, "/portal/" + acme + "/../../v1/session": http.StatusNotFound,
		"/portal/a%20b/": http.StatusNotFound, "/portal/": http.StatusNotFound} {
		resp, err := http.Get(b.apiURL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, path)
		if want == http.StatusOK {
			require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'", path)
		}
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noRedirect.Get(b.apiURL + "/portal/" + acme)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	require.Equal(t, "/portal/"+acme+"/", resp.Header.Get("Location"))

	// 1. The link opens the portal; the code leaves the address bar.
	main := br.tab()
	full := link(map[string]any{"capabilities": everything})
	br.do(main, "open the link", chromedp.Navigate(full.URL), chromedp.WaitVisible(chromedp.CSS("table#endpoints")))
	require.NotContains(t, href(br, main), "code=", "the code is gone from the address bar")
	require.Equal(t, b.apiURL+"/portal/"+acme+"/#/endpoints", href(br, main))
	require.Equal(t, 0, eval[int](br, main, `localStorage.length + sessionStorage.length`), "nothing kept in storage")
	require.Empty(t, eval[string](br, main, `document.cookie`))
	br.shot(main, "opened")

	// Opening it again: "link used".
	again := br.tab()
	br.do(again, "reopen the link", chromedp.Navigate(full.URL), chromedp.WaitVisible(chromedp.CSS("#link-used")))
	require.NotContains(t, href(br, again), "code=")
	br.shot(again, "link-used")

	// 2a. The create form's type swaps the webhook's URL for a broker's
	// config and credentials, the credentials as password inputs. A nats
	// destination nobody listens at is refused (the API reaches a broker
	// before it keeps one): the API's own problem is shown beside the
	// form, naming its field, and nothing is created.
	pick := func(typ string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("#create-endpoint select[name=type]"); s.value = "` +
			typ + `"; s.dispatchEvent(new Event("change")); })()`)
	}
	inputs := func(form string) string {
		return eval[string](br, main, `Array.from(document.querySelectorAll("`+form+` input")).map(i => i.name + ":" + i.type).join(",")`)
	}
	for _, c := range []struct{ typ, inputs string }{
		{"nats", "config.url:text,config.subject:text,config.stream:text,credentials.username:password,credentials.password:password,credentials.token:password,event_types:text"},
		{"redis", "config.addr:text,config.stream:text,config.tls:checkbox,config.db:number,credentials.username:password,credentials.password:password,event_types:text"},
		{"rabbitmq", "config.url:text,config.exchange:text,credentials.username:password,credentials.password:password,event_types:text"},
		{"webhook", "url:text,event_types:text"},
	} {
		br.do(main, "the create form as "+c.typ, pick(c.typ))
		require.Equal(t, c.inputs, inputs("#create-endpoint"), c.typ)
	}
	natsPassword := "nats-pw-" + b.prefix
	br.do(main, "a nats endpoint nobody listens at", pick("nats"),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name="config.url"]`), "nats://127.0.0.1:1"),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name="config.subject"]`), "orders"),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name="credentials.password"]`), natsPassword),
		chromedp.Click(chromedp.CSS(`#create-endpoint button`)),
		chromedp.WaitVisible(chromedp.CSS(`#created .error`)))
	br.shot(main, "nats-endpoint-refused")
	var refusal struct {
		Detail string `json:"detail"`
		Field  string `json:"field"`
	}
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPost, "/v1/endpoints", map[string]any{"tenant_id": acme, "type": "nats",
		"config": map[string]any{"url": "nats://127.0.0.1:1", "subject": "orders"}, "credentials": map[string]any{"password": natsPassword}}, &refusal),
		"the same destination, sent to the API")
	require.NotEmpty(t, refusal.Detail)
	require.NotEmpty(t, refusal.Field)
	shown := eval[string](br, main, `document.querySelector("#created .error").textContent`)
	require.Contains(t, shown, refusal.Detail, "the API's problem, shown beside the form")
	require.NotContains(t, shown, natsPassword)
	require.Equal(t, refusal.Field, eval[string](br, main, `document.querySelector("#created .error").dataset.field`))
	fieldJS, _ := json.Marshal(`#create-endpoint [name="` + refusal.Field + `"]`)
	marked := ""
	if eval[bool](br, main, `document.querySelector(`+string(fieldJS)+`) !== null`) {
		marked = refusal.Field
	}
	require.Equal(t, marked, eval[string](br, main, `Array.from(document.querySelectorAll("#create-endpoint [aria-invalid=true]")).map(e => e.name).join(",")`),
		"the input the problem names, and only it, is marked")
	require.Equal(t, 0, eval[int](br, main, `document.querySelectorAll("#endpoints tr[data-endpoint]").length`), "nothing created")
	// What the form sent: the inputs left empty left out, a checkbox as a
	// boolean, a number as a number.
	sentCreate := func() string {
		t.Helper()
		body := ""
		for _, r := range br.log.all() {
			if r.method == http.MethodPost && r.url == b.apiURL+"/v1/endpoints" {
				body = r.body
			}
		}
		return body
	}
	require.JSONEq(t, `{"type":"nats","config":{"url":"nats://127.0.0.1:1","subject":"orders"},"credentials":{"password":"`+natsPassword+`"}}`, sentCreate())
	redisPassword := "redis-pw-" + b.prefix
	br.do(main, "a redis endpoint nobody listens at", pick("redis"),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name="config.addr"]`), "127.0.0.1:1"),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name="config.stream"]`), "orders"),
		chromedp.Click(chromedp.CSS(`#create-endpoint input[name="config.tls"]`)),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name="config.db"]`), "2"),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name="credentials.password"]`), redisPassword),
		chromedp.Click(chromedp.CSS(`#create-endpoint button`)),
		chromedp.WaitVisible(chromedp.CSS(`#created .error`)))
	require.JSONEq(t, `{"type":"redis","config":{"addr":"127.0.0.1:1","stream":"orders","tls":true,"db":2},"credentials":{"password":"`+redisPassword+`"}}`,
		sentCreate())
	require.NotContains(t, eval[string](br, main, `document.querySelector("#created .error").textContent`), redisPassword)

	// 2b. A filter the API refuses at creation: its problem is shown beside
	// the filter, as the path at fault and why, the filter marked, and
	// nothing is created.
	badFilter := `{"data": {"amount": {"$gt": true}}}`
	br.do(main, "an endpoint with a bad filter", pick("webhook"),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name=url]`), rcv.srv.URL),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint textarea[name=filter]`), badFilter),
		chromedp.Click(chromedp.CSS(`#create-endpoint button`)),
		chromedp.WaitVisible(chromedp.CSS(`#create-endpoint #filter-error`)))
	br.shot(main, "endpoint-bad-filter-refused")
	refusal.Detail, refusal.Field = "", ""
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPost, "/v1/endpoints", map[string]any{"tenant_id": acme, "url": rcv.srv.URL,
		"filter": json.RawMessage(badFilter)}, &refusal), "the same filter, sent to the API")
	require.Equal(t, "filter.data.amount.$gt", refusal.Field)
	require.NotEmpty(t, refusal.Detail)
	require.Equal(t, "filter.data.amount.$gt: "+refusal.Detail, eval[string](br, main, `document.querySelector("#create-endpoint #filter-error").textContent`))
	require.Equal(t, refusal.Field, eval[string](br, main, `document.querySelector("#create-endpoint #filter-error").dataset.field`))
	require.Equal(t, "filter", eval[string](br, main, `Array.from(document.querySelectorAll("#create-endpoint [aria-invalid=true]")).map(e => e.name).join(",")`))
	require.Equal(t, 0, eval[int](br, main, `document.querySelectorAll("#endpoints tr[data-endpoint]").length`), "nothing created")
	// (SetValue refuses "": its script answers the value it set.)
	br.do(main, "clear the filter", chromedp.Evaluate[chromedp.Void](`document.querySelector("#create-endpoint textarea[name=filter]").value = ""`))

	// 2. A customer creates an endpoint: its secret is shown once.
	br.do(main, "create an endpoint", pick("webhook"),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name=url]`), rcv.srv.URL),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name=event_types]`), "order.*"),
		chromedp.Click(chromedp.CSS(`#create-endpoint button`)),
		chromedp.WaitVisible(chromedp.CSS("#secret-value")))
	secret := eval[string](br, main, `document.querySelector("#secret-value").textContent`)
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)
	epID := eval[string](br, main, `document.querySelector("#secret code").textContent`)
	br.shot(main, "endpoint-created-secret-once")
	var ep map[string]any
	require.Equal(t, http.StatusOK, b.callAs(producer, http.MethodGet, "/v1/endpoints/"+epID, nil, &ep))
	require.Equal(t, rcv.srv.URL, ep["url"])
	br.do(main, "the endpoint's page", chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints/`+epID+`"`),
		chromedp.WaitVisible(chromedp.CSS(`[data-action=rotate-secret]`)))
	require.NotContains(t, eval[string](br, main, `document.documentElement.outerHTML`), secret, "the secret is shown once")
	require.Equal(t, "webhook", eval[string](br, main, `document.querySelector("#endpoint-type").textContent`))
	require.Equal(t, 0, eval[int](br, main, `document.querySelectorAll("#rotate-credentials, #credential-names").length`), "a webhook has no credentials")
	br.shot(main, "endpoint")

	// 3. 3 and 2 arrive: the lane shows 1 missing. 1 arrives: 1, 2, 3 in order.
	corr := "order-" + b.prefix
	publish(corr+"-3", corr, 3)
	publish(corr+"-2", corr, 2)
	br.do(main, "the lane blocked by 1", chromedp.Evaluate[chromedp.Void](`location.hash = "#/correlations/`+corr+`"`),
		waitText("#lanes tr[data-lane] .blocked", "blocked by 1 (missing)"))
	require.Equal(t, "2,3", eval[string](br, main, `document.querySelector("#lanes [data-parked]").dataset.parked`))
	br.shot(main, "lane-blocked-by-1-missing")
	require.Empty(t, rcv.of(corr), "nothing delivered while 1 is missing")
	publish(corr+"-1", corr, 1)
	br.do(main, "the lane delivered through 3",
		chromedp.Poll[chromedp.Void](`document.querySelector("#lanes [data-delivered-through]")?.dataset.deliveredThrough === "3"`, chromedp.WithPollingTimeout(0)),
		waitText("#lanes tr[data-lane] .blocked", "not blocked"))
	require.Equal(t, []string{"1", "2", "3"}, rcv.of(corr), "the receiver took 1, 2, 3 in order")
	br.shot(main, "lane-delivered-1-2-3")
	for _, seq := range []string{"1", "2", "3"} {
		br.do(main, "event "+seq+" delivered", chromedp.Evaluate[chromedp.Void](`location.hash = "#/events/`+corr+"-"+seq+`"`),
			waitText("main h1", corr+"-"+seq), chromedp.WaitVisible(chromedp.CSS(`section[data-delivery] [data-state=delivered]`)))
	}
	br.shot(main, "event-3-delivered")

	// 3b. A test event: sent from the endpoint's page, to it alone, in a
	// correlation of its own; the page follows it until delivered, and the
	// receiver took it, signed with the endpoint's secret.
	testCorr, testID := store.TestCorrelation(epID), store.TestEventID(epID, 1)
	br.do(main, "send a test event", chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints/`+epID+`"`),
		chromedp.Click(chromedp.CSS(`[data-action=send-test-event]`)),
		chromedp.WaitVisible(chromedp.CSS(`#test-event[data-state=delivered]`)))
	require.Equal(t, testID, eval[string](br, main, `document.querySelector("#test-event code").textContent`))
	require.Equal(t, []string{"1"}, rcv.of(testCorr), "the receiver took the test event")
	require.NoError(t, rcv.verify(testID, secret), "signed with the endpoint's secret")
	require.Equal(t, []string{"1", "2", "3"}, rcv.of(corr), "the customer's own correlation is untouched")
	br.shot(main, "test-event-delivered")
	// Its page again: the last 24 hours by the hour hold these four
	// deliveries (1, 2, 3 and the test), in the last hour or two.
	br.do(main, "the endpoint's day", chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints"`),
		chromedp.WaitVisible(chromedp.CSS("table#endpoints")),
		chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints/`+epID+`"`), chromedp.WaitVisible(chromedp.CSS(`#day-chart`)))
	require.Equal(t, 24, eval[int](br, main, `document.querySelectorAll("#day-chart .hour").length`))
	require.Equal(t, 4, eval[int](br, main, `Array.from(document.querySelectorAll("#day-chart .hour")).reduce((n, c) => n + Number(c.dataset.attempts), 0)`))
	br.shot(main, "endpoint-last-24-hours")

	// 3c. The event log: a correlation's events, newest first; then a
	// search by type from the form finds the test event alone.
	rows := `Array.from(document.querySelectorAll("#event-log tr[data-event]")).map(r => r.dataset.event).join(",")`
	br.do(main, "the event log by correlation", chromedp.Evaluate[chromedp.Void](`location.hash = "#/events?correlation_id=`+corr+`"`),
		chromedp.WaitVisible(chromedp.CSS(`#event-log tr[data-event="`+corr+`-3"]`)))
	require.Equal(t, corr+"-1,"+corr+"-2,"+corr+"-3", eval[string](br, main, rows), "newest first: 1 was published last")
	// The whole log holds the test event, which the correlation's does
	// not: waiting for it waits for the new view, whose form is filled.
	br.do(main, "search the log by type", chromedp.Evaluate[chromedp.Void](`location.hash = "#/events"`),
		chromedp.WaitVisible(chromedp.CSS(`#event-log tr[data-event="`+testID+`"]`)),
		chromedp.SetValue(chromedp.CSS(`#log-search input[name=type]`), store.TestEventType),
		chromedp.Click(chromedp.CSS(`#log-search button`)),
		chromedp.Poll[chromedp.Void](rows+` === "`+testID+`"`, chromedp.WithPollingTimeout(0)))
	require.Contains(t, href(br, main), "#/events?type=hookflow.test", "the search is in the address")
	br.shot(main, "event-log-search")

	// 3d. The event types seen, each with its latest event's payload.
	typeRow := func(typ string) string { return `#event-types tr[data-type="` + typ + `"]` }
	br.do(main, "the event types", chromedp.Evaluate[chromedp.Void](`location.hash = "#/event-types"`),
		chromedp.WaitVisible(chromedp.CSS(typeRow("order.updated"))), chromedp.WaitVisible(chromedp.CSS(typeRow(store.TestEventType))))
	require.JSONEq(t, `{"n":1}`, eval[string](br, main, `document.querySelector('`+typeRow("order.updated")+` pre').textContent`),
		"the latest order.updated (1 was published last)")
	require.Contains(t, eval[string](br, main, `document.querySelector('`+typeRow(store.TestEventType)+` pre').textContent`), epID)
	br.shot(main, "event-types-seen")

	// 3d'. Beside them the catalog: a type catalogued but never seen shows
	// its version, description and schema, with its example as the sample.
	entry := map[string]any{"description": "an invoice was paid",
		"schema":  map[string]any{"type": "object", "required": []string{"amount"}, "properties": map[string]any{"amount": map[string]any{"type": "integer"}}},
		"example": map[string]any{"amount": 4200}}
	var ck struct {
		Key string `json:"key"`
	}
	require.Equal(t, http.StatusCreated, b.call(http.MethodPost, "/v1/api-keys", map[string]any{"name": "acme-catalog", "tenant_id": acme,
		"scopes": []string{"endpoints:write"}}, &ck))
	require.Equal(t, http.StatusCreated, b.callAs(ck.Key, http.MethodPut, "/v1/event-types/invoice.paid", entry, nil))
	br.do(main, "the catalogued type", chromedp.Evaluate[chromedp.Void](`location.hash = "#/"; location.hash = "#/event-types"`),
		chromedp.WaitVisible(chromedp.CSS(typeRow("invoice.paid"))))
	catalogued := eval[string](br, main, `document.querySelector('`+typeRow("invoice.paid")+`').textContent`)
	require.Contains(t, catalogued, "version 1")
	require.Contains(t, catalogued, "an invoice was paid")
	require.Contains(t, catalogued, "the catalog's example")
	require.JSONEq(t, `{"amount":4200}`, eval[string](br, main, `document.querySelector('`+typeRow("invoice.paid")+` pre.sample').textContent`))
	require.Contains(t, eval[string](br, main, `document.querySelector('`+typeRow("invoice.paid")+` td.schema pre').textContent`), `"required"`)
	require.Contains(t, eval[string](br, main, `document.querySelector('`+typeRow("order.updated")+`').textContent`), "not catalogued")
	br.shot(main, "event-types-catalog")

	// 3e. The headers editor: two custom headers replace none; the API
	// shows their names with the values hidden, and the next test event
	// carries them to the receiver.
	br.do(main, "set custom headers", chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints/`+epID+`"`),
		chromedp.WaitVisible(chromedp.CSS(`#edit-headers textarea`)),
		chromedp.SetValue(chromedp.CSS(`#edit-headers textarea`), "X-Api-Key: k-"+b.prefix+"\nX-Customer: acme"),
		chromedp.Click(chromedp.CSS(`#edit-headers button`)), chromedp.WaitVisible(chromedp.CSS(`#headers-saved`)))
	ep = nil
	require.Equal(t, http.StatusOK, b.callAs(producer, http.MethodGet, "/v1/endpoints/"+epID, nil, &ep))
	require.Equal(t, map[string]any{"X-Api-Key": "********", "X-Customer": "********"}, ep["headers"])
	require.NotContains(t, eval[string](br, main, `document.documentElement.outerHTML`), "k-"+b.prefix, "a value is not shown back")
	br.shot(main, "headers-replaced")
	br.do(main, "a test event with the headers", chromedp.Click(chromedp.CSS(`[data-action=send-test-event]`)),
		chromedp.WaitVisible(chromedp.CSS(`#test-event[data-state=delivered]`)))
	require.Equal(t, "k-"+b.prefix, rcv.header(store.TestEventID(epID, 2), "X-Api-Key"))
	require.Equal(t, "acme", rcv.header(store.TestEventID(epID, 2), "X-Customer"))

	// 3f. Filters. The endpoint's filter is set from its page and shown
	// there and in the list; a bad one is refused beside the editor,
	// naming the path at fault, and the stored one stays as it was.
	storedFilter := func(id string) string {
		t.Helper()
		var got struct {
			Filter json.RawMessage `json:"filter"`
		}
		require.Equal(t, http.StatusOK, b.callAs(producer, http.MethodGet, "/v1/endpoints/"+id, nil, &got))
		return string(got.Filter)
	}
	bigOrders := `{"data":{"amount":{"$gte":1000}}}`
	br.do(main, "set a filter", chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints/`+epID+`"`),
		chromedp.WaitVisible(chromedp.CSS(`#edit-filter textarea[name=filter]`)),
		chromedp.SetValue(chromedp.CSS(`#edit-filter textarea[name=filter]`), `{"data": {"amount": {"$gte": 1000}}}`),
		chromedp.Click(chromedp.CSS(`#edit-filter button[type=submit]`)), waitText("#filter-saved", "Filter saved"))
	require.JSONEq(t, bigOrders, storedFilter(epID))
	require.JSONEq(t, bigOrders, eval[string](br, main, `document.querySelector("#endpoint-filter").dataset.filter`))
	require.JSONEq(t, bigOrders, eval[string](br, main, `document.querySelector("#endpoint-filter pre").textContent`))
	br.shot(main, "filter-saved")
	patches := func() int {
		n := 0
		for _, r := range br.log.all() {
			if r.method == http.MethodPatch && r.url == b.apiURL+"/v1/endpoints/"+epID {
				n++
			}
		}
		return n
	}
	before := patches()
	br.do(main, "a filter that is not JSON", chromedp.SetValue(chromedp.CSS(`#edit-filter textarea[name=filter]`), `{"data": `),
		chromedp.Click(chromedp.CSS(`#edit-filter button[type=submit]`)), waitText("#edit-filter #filter-error", "filter: not JSON"))
	require.Equal(t, before, patches(), "a filter that is not JSON is not sent")
	br.do(main, "a bad filter", chromedp.SetValue(chromedp.CSS(`#edit-filter textarea[name=filter]`), badFilter),
		chromedp.Click(chromedp.CSS(`#edit-filter button[type=submit]`)), waitText("#edit-filter #filter-error", "filter.data.amount.$gt: "))
	br.shot(main, "bad-filter-refused")
	refusal.Detail, refusal.Field = "", ""
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPatch, "/v1/endpoints/"+epID+"?tenant_id="+acme,
		map[string]any{"filter": json.RawMessage(badFilter)}, &refusal), "the same filter, sent to the API")
	require.Equal(t, "filter.data.amount.$gt: "+refusal.Detail, eval[string](br, main, `document.querySelector("#edit-filter #filter-error").textContent`))
	require.Equal(t, "filter.data.amount.$gt", eval[string](br, main, `document.querySelector("#edit-filter #filter-error").dataset.field`))
	require.Equal(t, "true", eval[string](br, main, `document.querySelector("#edit-filter textarea").getAttribute("aria-invalid")`))
	require.JSONEq(t, badFilter, eval[string](br, main, `document.querySelector("#edit-filter textarea").value`), "what was typed stays, to be corrected")
	require.JSONEq(t, bigOrders, storedFilter(epID), "a refused filter changes nothing")
	require.JSONEq(t, bigOrders, eval[string](br, main, `document.querySelector("#endpoint-filter").dataset.filter`))

	// A second endpoint, created from the page with a filter on metadata,
	// listed with it beside the first's.
	euOnly := `{"metadata":{"region":"eu"}}`
	br.do(main, "create an endpoint with a filter", chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints"`),
		chromedp.WaitVisible(chromedp.CSS(`#create-endpoint textarea[name=filter]`)),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name=url]`), rcv.srv.URL),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint input[name=event_types]`), "order.paid"),
		chromedp.SetValue(chromedp.CSS(`#create-endpoint textarea[name=filter]`), euOnly),
		chromedp.Click(chromedp.CSS(`#create-endpoint button`)),
		chromedp.WaitVisible(chromedp.CSS("#secret-value")))
	euID := eval[string](br, main, `document.querySelector("#secret code").textContent`)
	require.JSONEq(t, euOnly, storedFilter(euID))
	listed := func(id string) string {
		return eval[string](br, main, `document.querySelector('#endpoints tr[data-endpoint="`+id+`"] [data-filter]').dataset.filter`)
	}
	require.JSONEq(t, bigOrders, listed(epID))
	require.JSONEq(t, euOnly, listed(euID))
	br.shot(main, "endpoints-with-filters")

	// Three orders paid: the first both take; the second neither (every
	// filter leaves it out); the third only the EU endpoint, which the
	// big-orders one's filter leaves out.
	paid := "paid-" + b.prefix
	pay := func(seq int64, amount int, region string) []string {
		t.Helper()
		var acc struct {
			FilteredOut []string `json:"filtered_out"`
		}
		require.Equal(t, http.StatusAccepted, b.callAs(producer, http.MethodPost, "/v1/events", map[string]any{
			"id": fmt.Sprintf("%s-%d", paid, seq), "correlation_id": paid, "sequence": seq, "type": "order.paid",
			"data": map[string]any{"amount": amount}, "metadata": map[string]any{"region": region}}, &acc))
		return acc.FilteredOut
	}
	require.Empty(t, pay(1, 1500, "eu"))
	require.Equal(t, sortedCopy(epID, euID), pay(2, 10, "us"))
	require.Equal(t, []string{epID}, pay(3, 20, "eu"))
	waitFor(t, time.Minute, "1 to both endpoints, 3 to the EU one", func() bool { return len(rcv.of(paid)) == 3 })
	require.ElementsMatch(t, []string{"1", "1", "3"}, rcv.of(paid))
	leftOutJS := `Array.from(document.querySelectorAll("#filtered-out [data-filtered-out]")).map(e => e.dataset.filteredOut).join(",")`
	br.do(main, "an event a filter left out", chromedp.Evaluate[chromedp.Void](`location.hash = "#/events/`+paid+`-3"`),
		waitText("main h1", paid+"-3"), chromedp.WaitVisible(chromedp.CSS(`#filtered-out [data-filtered-out]`)),
		chromedp.WaitVisible(chromedp.CSS(`section[data-delivery="`+euID+`"] [data-state=delivered]`)))
	require.Equal(t, epID, eval[string](br, main, leftOutJS))
	require.Equal(t, "#/endpoints/"+epID, eval[string](br, main, `document.querySelector("#filtered-out a").getAttribute("href")`))
	require.Equal(t, 1, eval[int](br, main, `document.querySelectorAll("section[data-delivery]").length`))
	require.JSONEq(t, `{"region":"eu"}`, eval[string](br, main, `document.querySelector("#event-metadata pre").textContent`))
	require.Equal(t, 0, eval[int](br, main, `document.querySelectorAll("#routing").length`), "it was delivered")
	br.shot(main, "event-left-out-by-a-filter")
	br.do(main, "an event every filter left out", chromedp.Evaluate[chromedp.Void](`location.hash = "#/events/`+paid+`-2"`),
		waitText("main h1", paid+"-2"), chromedp.WaitVisible(chromedp.CSS(`#routing`)))
	require.Equal(t, "filtered", eval[string](br, main, `document.querySelector("#routing").dataset.routing`))
	require.Contains(t, eval[string](br, main, `document.querySelector("#routing").textContent`), "left out by every filter")
	require.Equal(t, strings.Join(sortedCopy(epID, euID), ","), eval[string](br, main, leftOutJS))
	require.Equal(t, 0, eval[int](br, main, `document.querySelectorAll("section[data-delivery]").length`))
	require.JSONEq(t, `{"region":"us"}`, eval[string](br, main, `document.querySelector("#event-metadata pre").textContent`))
	br.shot(main, "event-left-out-by-every-filter")
	br.do(main, "an event both took", chromedp.Evaluate[chromedp.Void](`location.hash = "#/events/`+paid+`-1"`),
		waitText("main h1", paid+"-1"), chromedp.WaitVisible(chromedp.CSS(`section[data-delivery="`+epID+`"]`)))
	require.Equal(t, 0, eval[int](br, main, `document.querySelectorAll("#filtered-out, #routing").length`))

	// A session limited to the big-orders endpoint is not shown the events
	// its filter left out (their metadata and state are the tenant's other
	// endpoints' business), and sees the one it took without the EU
	// endpoint; it edits its filter.
	mine := br.tab()
	mineLink := link(map[string]any{"capabilities": []string{"endpoints:manage"}, "endpoint_ids": []string{epID}})
	br.do(mine, "open a session of one endpoint", chromedp.Navigate(mineLink.URL), chromedp.WaitVisible(chromedp.CSS("table#endpoints")))
	for _, seq := range []string{"2", "3"} {
		br.do(mine, "event "+seq+" as one endpoint's session", chromedp.Evaluate[chromedp.Void](`location.hash = "#/events/`+paid+"-"+seq+`"`),
			chromedp.WaitVisible(chromedp.CSS(`#not-found`)))
		require.NotContains(t, eval[string](br, mine, `document.querySelector("main").outerHTML`), euID, seq)
		require.NotContains(t, eval[string](br, mine, `document.querySelector("main").outerHTML`), `"region"`, seq)
	}
	br.do(mine, "event 1 as one endpoint's session", chromedp.Evaluate[chromedp.Void](`location.hash = "#/events/`+paid+`-1"`),
		waitText("main h1", paid+"-1"), chromedp.WaitVisible(chromedp.CSS(`section[data-delivery="`+epID+`"]`)))
	require.NotContains(t, eval[string](br, mine, `document.querySelector("main").outerHTML`), euID)
	require.Equal(t, 0, eval[int](br, mine, `document.querySelectorAll("#filtered-out, #routing").length`))
	br.shot(mine, "one-endpoint-session-left-out")
	smallOrders := `{"data":{"amount":{"$lt":100}}}`
	br.do(mine, "a session of one endpoint edits its filter", chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints/`+epID+`"`),
		chromedp.WaitVisible(chromedp.CSS(`#edit-filter textarea[name=filter]`)),
		chromedp.SetValue(chromedp.CSS(`#edit-filter textarea[name=filter]`), smallOrders),
		chromedp.Click(chromedp.CSS(`#edit-filter button[type=submit]`)), waitText("#filter-saved", "Filter saved"))
	require.JSONEq(t, smallOrders, storedFilter(epID))
	tokens = append(tokens, tokenOf(t, br.log, mineLink))

	// Remove filter sends null: the endpoint takes every event of its
	// types again (the dead letters below are order.updated, amount-less).
	br.do(main, "remove the filter", chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints/`+epID+`"`),
		chromedp.WaitVisible(chromedp.CSS(`[data-action=remove-filter]`)),
		chromedp.Click(chromedp.CSS(`[data-action=remove-filter]`)), waitText("#filter-saved", "Filter removed"))
	require.Empty(t, storedFilter(epID))
	require.Empty(t, eval[string](br, main, `document.querySelector("#endpoint-filter").dataset.filter`))
	require.Equal(t, 0, eval[int](br, main, `document.querySelectorAll("[data-action=remove-filter]").length`))
	br.shot(main, "filter-removed")

	// 4. Dead letters: a double click on Replay is one replay; a skip is
	// recorded as portal:<actor>.
	dlReplay, dlSkip := "dl-"+b.prefix+"-r", "dl-"+b.prefix+"-s"
	rcv.setRefuse(dlReplay, true)
	rcv.setRefuse(dlSkip, true)
	publish(dlReplay, "dl-r-"+b.prefix, 1)
	publish(dlSkip, "dl-s-"+b.prefix, 1)
	waitFor(t, time.Minute, "two dead letters", func() bool {
		var page struct {
			Items []map[string]any `json:"items"`
		}
		b.callAs(producer, http.MethodGet, "/v1/dead-letters?status=open", nil, &page)
		return len(page.Items) == 2
	})
	rcv.setRefuse(dlReplay, false)
	row := func(id string) string { return `tr[data-dead-letter="` + id + `"]` }
	br.do(main, "the dead letters", chromedp.Evaluate[chromedp.Void](`location.hash = "#/dead-letters"`),
		chromedp.WaitVisible(chromedp.CSS(row(dlReplay))), chromedp.WaitVisible(chromedp.CSS(row(dlSkip))))
	br.shot(main, "dead-letters")
	br.do(main, "double-click replay", chromedp.DoubleClick(chromedp.CSS(row(dlReplay)+` button[data-action=replay]`)),
		waitText("#done", dlReplay+": replaying"))
	br.shot(main, "replayed")
	waitFor(t, time.Minute, "the replayed event delivered", func() bool { return slices.Contains(rcv.of("dl-r-"+b.prefix), "1") })
	var dl struct {
		Status      string `json:"status"`
		ReplayCount int    `json:"replay_count"`
		ReplayedBy  string `json:"replayed_by"`
		SkippedBy   string `json:"skipped_by"`
		SkipNote    string `json:"skip_note"`
	}
	require.Equal(t, http.StatusOK, b.callAs(producer, http.MethodGet, "/v1/dead-letters/"+dlReplay+"?endpoint_id="+epID, nil, &dl))
	require.Equal(t, 1, dl.ReplayCount, "a double click is one replay")
	require.Equal(t, "portal:"+actor, dl.ReplayedBy)
	require.Equal(t, 2, rcv.requests(dlReplay), "one refused attempt, one replayed")
	br.do(main, "skip", chromedp.SetValue(chromedp.CSS(row(dlSkip)+` input[name=note]`), "refunded by hand"),
		chromedp.Click(chromedp.CSS(row(dlSkip)+` button[data-action=skip]`)), waitText("#done", dlSkip+": skipped"))
	br.shot(main, "skipped")
	waitFor(t, time.Minute, "the skip recorded", func() bool {
		b.callAs(producer, http.MethodGet, "/v1/dead-letters/"+dlSkip+"?endpoint_id="+epID, nil, &dl)
		return dl.Status == "skipped"
	})
	require.Equal(t, "portal:"+actor, dl.SkippedBy)
	require.Equal(t, "refunded by hand", dl.SkipNote)

	// 5. A URL naming another tenant's endpoint: "not found", and nothing of it.
	br.do(main, "another tenant's endpoint", chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints/`+g.endpoint+`"`),
		chromedp.WaitVisible(chromedp.CSS("#not-found")))
	dom := eval[string](br, main, `document.documentElement.outerHTML`)
	require.NotContains(t, dom, g.endpoint)
	require.NotContains(t, dom, g.rcv.srv.URL)
	require.NotContains(t, dom, globex)
	br.shot(main, "other-tenant-not-found")

	// 6. A view session: no write controls, and a write from the page's
	// own script, with its token, is refused.
	view := br.tab()
	viewLink := link(map[string]any{})
	br.do(view, "open a view session", chromedp.Navigate(viewLink.URL), chromedp.WaitVisible(chromedp.CSS("table#endpoints")))
	require.Equal(t, 0, eval[int](br, view, `document.querySelectorAll("#create-endpoint, [data-action]").length`))
	br.shot(view, "view-endpoints")
	br.do(view, "a view session's endpoint", chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints/`+epID+`"`),
		chromedp.WaitVisible(chromedp.CSS(`main h1 code`)))
	require.Equal(t, 0, eval[int](br, view, `document.querySelectorAll("form#edit-endpoint, [data-action]").length`))
	rcv.setRefuse(dlReplay+"-2", true)
	publish(dlReplay+"-2", "dl-v-"+b.prefix, 1)
	waitFor(t, time.Minute, "a dead letter for the view session", func() bool {
		var page struct {
			Items []map[string]any `json:"items"`
		}
		b.callAs(producer, http.MethodGet, "/v1/dead-letters?status=open", nil, &page)
		return len(page.Items) == 1
	})
	br.do(view, "a view session's dead letters", chromedp.Evaluate[chromedp.Void](`location.hash = "#/dead-letters"`),
		chromedp.WaitVisible(chromedp.CSS(row(dlReplay+"-2"))))
	require.Equal(t, 0, eval[int](br, view, `document.querySelectorAll("[data-action], button[data-action=replay]").length`), "no replay or skip")
	br.shot(view, "view-dead-letters-no-controls")
	viewToken := tokenOf(t, br.log, viewLink)
	tokens = append(tokens, viewToken)
	status := eval[int](br, view, fmt.Sprintf(`fetch("/v1/endpoints/%s", {method: "PATCH", headers: {"Authorization": "Bearer %s",
		"Content-Type": "application/json"}, body: JSON.stringify({disabled: true})}).then(r => r.status)`, epID, viewToken))
	require.Equal(t, http.StatusForbidden, status, "a write from the page's script")
	status = eval[int](br, view, fmt.Sprintf(`fetch("/v1/dead-letters/%s/replay", {method: "POST", headers: {"Authorization": "Bearer %s",
		"Content-Type": "application/json"}, body: "{}"}).then(r => r.status)`, dlReplay+"-2", viewToken))
	require.Equal(t, http.StatusForbidden, status)

	// The full session replays that one as its endpoint's whole set.
	rcv.setRefuse(dlReplay+"-2", false)
	br.do(main, "the endpoint's dead letters", chromedp.Evaluate[chromedp.Void](`location.hash = "#/dead-letters"`),
		chromedp.WaitVisible(chromedp.CSS(row(dlReplay+"-2"))),
		chromedp.Click(chromedp.CSS(`[data-action=replay-endpoint][data-endpoint="`+epID+`"]`)), waitText("#done", epID+": 1 replaying"))
	br.shot(main, "replayed-by-endpoint")
	waitFor(t, time.Minute, "the endpoint's dead letter replayed", func() bool { return slices.Contains(rcv.of("dl-v-"+b.prefix), "1") })

	// 7. A short session past its end, and a revoked one: "expired", with
	// the way back. The shortest TTL is 5 minutes; its end is moved into
	// the past in the database rather than waited for.
	short := br.tab()
	shortLink := link(map[string]any{"ttl": "5m"})
	br.do(short, "open a 5-minute session", chromedp.Navigate(shortLink.URL), chromedp.WaitVisible(chromedp.CSS("table#endpoints")))
	_, err = b.store.Pool().Exec(ctx, "UPDATE portal_sessions SET expires_at = now() - interval '1 second' WHERE id = $1", shortLink.ID)
	require.NoError(t, err)
	br.do(short, "the short session's end", chromedp.Evaluate[chromedp.Void](`location.hash = "#/dead-letters"`),
		chromedp.WaitVisible(chromedp.CSS("#expired")))
	require.Equal(t, returnURL, eval[string](br, short, `document.querySelector("#expired a#return").href`))
	br.shot(short, "short-session-expired")
	revoked := br.tab()
	revokedLink := link(map[string]any{})
	br.do(revoked, "open a session to revoke", chromedp.Navigate(revokedLink.URL), chromedp.WaitVisible(chromedp.CSS("table#endpoints")))
	require.Equal(t, http.StatusOK, b.call(http.MethodDelete, "/v1/tenants/"+acme+"/portal-sessions/"+revokedLink.ID, nil, nil))
	br.do(revoked, "the revoked session", chromedp.Evaluate[chromedp.Void](`location.hash = "#/dead-letters"`),
		chromedp.WaitVisible(chromedp.CSS("#expired")))
	require.Contains(t, eval[string](br, revoked, `document.querySelector("#expired").textContent`), "revoked")
	br.shot(revoked, "revoked-session-expired")

	// 8. Framed by an allowed origin it renders; by another it is refused.
	frameLink := link(map[string]any{})
	allowed.frame(frameLink.URL)
	framed := br.tab()
	br.do(framed, "the allowed origin's frame", chromedp.Navigate(allowed.srv.URL))
	waitFor(t, time.Minute, "the framed portal exchanging its code", func() bool { return tokenOrEmpty(br.log, frameLink) != "" })
	br.do(framed, "the framed portal rendered", framedShows("table#endpoints"))
	br.shot(framed, "framed-by-allowed-origin")
	strangerLink := link(map[string]any{})
	stranger.frame(strangerLink.URL)
	refused := br.tab()
	br.do(refused, "another origin's frame", chromedp.Navigate(stranger.srv.URL))
	pageURL := strings.SplitN(strangerLink.URL, "#", 2)[0]
	waitFor(t, time.Minute, "the frame refused", func() bool { return br.log.failure(pageURL) != "" })
	require.Contains(t, br.log.failure(pageURL), "ERR_BLOCKED_BY_RESPONSE")
	br.shot(refused, "framed-by-other-origin-refused")
	var exchanged *time.Time
	require.NoError(t, b.store.Pool().QueryRow(ctx, "SELECT code_used_at FROM portal_sessions WHERE id = $1", strangerLink.ID).Scan(&exchanged))
	require.Nil(t, exchanged, "the refused frame ran nothing: its code is unused")

	// 9. A broker endpoint (stored as the API stores one it has checked:
	// this stack has no broker to check one against) is listed and shown
	// with its type, its config as stored and its credentials' names, never
	// their values; it has no headers editor but a credentials rotation,
	// which the API refuses while the broker cannot be reached, shown
	// beside the form, the stored credentials untouched.
	natsID := "ep_" + b.prefix + "nats"
	natsCfg := `{"url":"nats://127.0.0.1:1","subject":"orders","stream":"ORDERS"}`
	_, err = b.store.Tenant(acme).EndpointCreate(ctx, store.Endpoint{ID: natsID, Type: "nats", URL: "nats://127.0.0.1:1/orders",
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", EventTypes: []string{"broker.only"}, Config: json.RawMessage(natsCfg),
		Credentials: map[string]string{"username": "svc-" + b.prefix, "password": natsPassword}, Settings: store.Settings{URLPathPublic: true}}, store.Caps{})
	require.NoError(t, err)
	natsRow := `#endpoints tr[data-endpoint="` + natsID + `"]`
	br.do(main, "the broker endpoint listed", chromedp.Evaluate[chromedp.Void](`location.hash = "#/endpoints"`), chromedp.WaitVisible(chromedp.CSS(natsRow)))
	require.Equal(t, "nats", eval[string](br, main, `document.querySelector('`+natsRow+` [data-type]').textContent`))
	require.JSONEq(t, natsCfg, eval[string](br, main, `document.querySelector('`+natsRow+` [data-config]').dataset.config`))
	require.Equal(t, "password,username", eval[string](br, main, `document.querySelector('`+natsRow+` [data-credentials]').dataset.credentials`))
	require.Equal(t, "webhook", eval[string](br, main, `document.querySelector('#endpoints tr[data-endpoint="`+epID+`"] [data-type]').textContent`))
	dom = eval[string](br, main, `document.documentElement.outerHTML`)
	require.NotContains(t, dom, natsPassword)
	require.NotContains(t, dom, "svc-"+b.prefix)
	br.shot(main, "broker-endpoint-listed")
	br.do(main, "the broker endpoint's page", chromedp.Click(chromedp.CSS(natsRow+` a`)), chromedp.WaitVisible(chromedp.CSS(`#rotate-credentials`)))
	require.Equal(t, "nats", eval[string](br, main, `document.querySelector("#endpoint-type").textContent`))
	for k, v := range map[string]string{"url": "nats://127.0.0.1:1", "subject": "orders", "stream": "ORDERS"} {
		require.Equal(t, v, eval[string](br, main, `document.querySelector('tr[data-config="`+k+`"] td').textContent`), k)
	}
	require.Equal(t, "password,username", eval[string](br, main, `document.querySelector("#credential-names").dataset.credentials`))
	require.Equal(t, 0, eval[int](br, main, `document.querySelectorAll("#edit-headers").length`), "a broker has no custom headers")
	require.Equal(t, "credentials.username:password,credentials.password:password,credentials.token:password", inputs("#rotate-credentials"))
	dom = eval[string](br, main, `document.documentElement.outerHTML`)
	require.NotContains(t, dom, natsPassword)
	require.NotContains(t, dom, "svc-"+b.prefix)
	br.shot(main, "broker-endpoint")
	rotated := "rotated-" + b.prefix
	br.do(main, "rotate the broker's credentials",
		chromedp.SetValue(chromedp.CSS(`#rotate-credentials input[name="credentials.password"]`), rotated),
		chromedp.Click(chromedp.CSS(`#rotate-credentials button`)), chromedp.WaitVisible(chromedp.CSS(`#message .error`)))
	br.shot(main, "broker-credentials-refused")
	refusal.Detail, refusal.Field = "", ""
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPatch, "/v1/endpoints/"+natsID+"?tenant_id="+acme,
		map[string]any{"credentials": map[string]any{"password": rotated}}, &refusal), "the same rotation, sent to the API")
	require.NotEmpty(t, refusal.Detail)
	require.Contains(t, eval[string](br, main, `document.querySelector("#message .error").textContent`), refusal.Detail)
	require.Equal(t, refusal.Field, eval[string](br, main, `document.querySelector("#message .error").dataset.field`))
	var stored string
	require.NoError(t, b.store.Pool().QueryRow(ctx, "SELECT credentials->>'password' FROM endpoints WHERE id = $1", natsID).Scan(&stored))
	require.Equal(t, natsPassword, stored, "a refused rotation keeps the credentials")

	// No request URL or Referer carried a code or a token.
	for _, l := range []portalLink{full, shortLink, revokedLink, frameLink} {
		tokens = append(tokens, tokenOf(t, br.log, l))
	}
	reqs := br.log.all()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		for _, secret := range append(slices.Clone(codes), append(tokens, natsPassword, redisPassword, rotated)...) {
			require.NotContains(t, r.url, secret, "request URL %s", r.url)
			require.NotContains(t, r.headers["referer"], secret, "Referer of %s", r.url)
		}
		// What the page asks for itself carries no Referer at all (a frame's
		// document is asked for by the application framing it, whose policy
		// it is).
		if strings.HasPrefix(r.url, b.apiURL+"/v1/") || strings.HasSuffix(r.url, "/main.js") || strings.HasSuffix(r.url, "/portal.css") {
			require.Empty(t, r.headers["referer"], "no Referer from the page: %s", r.url)
		}
	}
	for _, tab := range []context.Context{main, view} {
		require.Equal(t, 0, eval[int](br, tab, `localStorage.length + sessionStorage.length`))
	}
	t.Logf("portal browser test: %d requests recorded, %d screenshots in %s", len(reqs), br.step, br.dir)
}

// tokenOf is the token the page sent after exchanging link's code: what
// DevTools saw in its requests' Authorization header, the page's script
// holding it nowhere a test could read.
func tokenOf(t *testing.T, log *netLog, l portalLink) string {
	t.Helper()
	tok := tokenOrEmpty(log, l)
	require.NotEmpty(t, tok, "the page sent no request with its session's token")
	return tok
}

// tokenOrEmpty finds the token of link l's session among the requests: the
// bearer token of the first API request, after the exchange of l's code,
// of the frame that exchanged it.
func tokenOrEmpty(log *netLog, l portalLink) string {
	u, _ := url.Parse(l.URL)
	base := u.Scheme + "://" + u.Host
	code, _ := strings.CutPrefix(u.Fragment, "code=")
	frame := ""
	for _, r := range log.all() {
		if r.url == base+"/v1/portal/session" && strings.Contains(r.body, code) {
			frame = r.frame
			continue
		}
		if frame == "" || r.frame != frame || !strings.HasPrefix(r.url, base+"/v1/") {
			continue
		}
		if tok, ok := strings.CutPrefix(r.headers["authorization"], "Bearer "); ok {
			return tok
		}
	}
	return ""
}

// framedShows waits for sel inside the page's iframe (same site: the
// frame's document is reachable from the page's DevTools target).
func framedShows(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS("iframe#portal"), chromedp.Populate(-1, true)))
		if err != nil {
			return err
		}
		_, err = chromedp.Run(ctx, chromedp.WaitVisible(chromedp.CSS(sel), chromedp.FromNode(nodes[0])))
		return err
	})
}

// sortedCopy is ids sorted, as the API lists an event's filtered_out.
func sortedCopy(ids ...string) []string {
	return slices.Sorted(slices.Values(ids))
}
