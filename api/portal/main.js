// routes names each operation the page calls with its method and path
// template: `satisfies` holds every template to a path of the document.
const routes = {
    portalSessionExchange: ["POST", "/v1/portal/session"],
    endpointList: ["GET", "/v1/endpoints"],
    endpointCreate: ["POST", "/v1/endpoints"],
    endpointGet: ["GET", "/v1/endpoints/{id}"],
    endpointUpdate: ["PATCH", "/v1/endpoints/{id}"],
    endpointDelete: ["DELETE", "/v1/endpoints/{id}"],
    endpointRotateSecret: ["POST", "/v1/endpoints/{id}/rotate-secret"],
    endpointTest: ["POST", "/v1/endpoints/{id}/test"],
    endpointStats: ["GET", "/v1/endpoints/{id}/stats"],
    statsEndpoints: ["GET", "/v1/stats/endpoints"],
    eventList: ["GET", "/v1/events"],
    eventTypeList: ["GET", "/v1/event-types"],
    eventGet: ["GET", "/v1/events/{id}"],
    correlationGet: ["GET", "/v1/correlations/{id}"],
    deadLetterList: ["GET", "/v1/dead-letters"],
    deadLetterReplay: ["POST", "/v1/dead-letters/{id}/replay"],
    deadLetterSkip: ["POST", "/v1/dead-letters/{id}/skip"],
    deadLetterReplayBatch: ["POST", "/v1/dead-letters/replay"],
};
// The session, in memory only.
let token = null;
let session = null;
let expiryTimer;
let refreshTimer;
// tenantInPath is the tenant the page was served for: the server framed it
// for that tenant's portal_origins, so a code of another tenant's is not
// used under it.
const tenantInPath = decodeURIComponent(location.pathname.split("/")[2] ?? "");
const app = document.getElementById("app");
// Ended is thrown once the session is over: its screen is shown already.
class Ended extends Error {
}
// ApiError is an answer that is not a 2xx, with its problem.
class ApiError extends Error {
    status;
    problem;
    constructor(status, problem) {
        super(problem.detail ?? problem.title ?? `HTTP ${status}`);
        this.status = status;
        this.problem = problem;
    }
}
function kind(p) {
    return (p.type ?? "").replace(/^.*\/problems\//, "");
}
// call runs operation op with the path's {id} filled, the query and body
// given, as the session (the exchange, before there is one, as nobody).
async function call(op, _ok, opts = {}) {
    const [method, template] = routes[op];
    let path = template.replace("{id}", encodeURIComponent(opts.id ?? ""));
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query ?? {}))
        if (v)
            q.set(k, v);
    if ([...q].length)
        path += "?" + q.toString();
    const headers = { Accept: "application/json" };
    if (token)
        headers.Authorization = "Bearer " + token;
    if (opts.body !== undefined)
        headers["Content-Type"] = "application/json";
    const resp = await fetch(path, {
        method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
        credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer", redirect: "error",
    });
    const text = await resp.text();
    const data = text ? JSON.parse(text) : {};
    if (!resp.ok) {
        const problem = data;
        if (token && resp.status === 401 && op !== "portalSessionExchange") {
            ended(kind(problem));
            throw new Ended();
        }
        throw new ApiError(resp.status, problem);
    }
    return data;
}
function h(tag, attrs = {}, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
        if (typeof v === "function")
            el.addEventListener(k, v);
        else if (v === true)
            el.setAttribute(k, "");
        else if (v !== false)
            el.setAttribute(k, v);
    }
    for (const c of children) {
        if (c === null || c === undefined || c === false)
            continue;
        el.append(typeof c === "object" ? c : String(c));
    }
    return el;
}
function show(...nodes) {
    app.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false).map((n) => (typeof n === "number" ? String(n) : n)));
}
function can(c) {
    return session?.capabilities.includes(c) ?? false;
}
// screen is a whole-page message: the session's end, a used link.
function screen(id, title, text, withReturn) {
    document.getElementById("bar").hidden = true;
    const ret = withReturn && session?.return_url ? h("p", {}, h("a", { href: session.return_url, id: "return" }, "Back to the application")) : null;
    show(h("div", { class: "screen", id }, h("h1", {}, title), h("p", {}, text), ret));
}
// ended forgets the token and shows why the session is over.
function ended(why) {
    token = null;
    clearTimeout(expiryTimer);
    clearInterval(refreshTimer);
    if (why === "portal-session-revoked") {
        screen("expired", "Session expired", "This portal session was revoked. Open the portal again from the application.", true);
    }
    else {
        screen("expired", "Session expired", "This portal session has expired. Open the portal again from the application.", true);
    }
}
function errorBox(err) {
    if (err instanceof ApiError) {
        return h("div", { class: "error", role: "alert", "data-field": err.problem.field ?? "" }, `${err.problem.title ?? "Error"}: ${err.message}`);
    }
    return h("div", { class: "error", role: "alert" }, String(err));
}
// refused shows err in out, beside form, and marks the form's input the
// problem names (its field, as "config.url", is the input's name), so
// the one to correct is plain to see.
function refused(form, out, err) {
    for (const el of form.querySelectorAll("[aria-invalid]"))
        el.removeAttribute("aria-invalid");
    out.replaceChildren(errorBox(err));
    const f = err instanceof ApiError ? err.problem.field : undefined;
    if (!f)
        return;
    const named = form.elements.namedItem(f);
    if (named instanceof HTMLElement)
        named.setAttribute("aria-invalid", "true");
}
function notFound() {
    show(h("div", { class: "screen", id: "not-found" }, h("h1", {}, "Not found"), h("p", {}, "There is nothing here that this session may see."), h("p", {}, h("a", { href: "#/endpoints" }, "Endpoints"))));
}
// guard renders a view, and a 404 as "not found" with nothing of what was
// asked for.
async function guard(view) {
    try {
        await view();
    }
    catch (err) {
        if (err instanceof Ended)
            return;
        if (err instanceof ApiError && err.status === 404)
            return notFound();
        show(errorBox(err));
    }
}
// ---- start: the link's code, exchanged once ----
async function start() {
    const code = new URLSearchParams(location.hash.slice(1)).get("code");
    if (code === null) {
        if (!token)
            screen("no-session", "Open the portal from its link", "This page needs the link the application gave you.", false);
        return;
    }
    // The code leaves the address bar (and the history entry) before
    // anything else happens, so no reload, bookmark or screen share keeps it.
    history.replaceState(null, "", location.pathname + "#/endpoints");
    token = null;
    session = null;
    let got;
    try {
        got = await call("portalSessionExchange", 200, { body: { code } });
    }
    catch (err) {
        const k = err instanceof ApiError ? kind(err.problem) : "";
        if (k === "portal-link-used")
            return screen("link-used", "Link used", "This link was opened already. Ask the application for a new one.", false);
        if (k === "portal-link-expired")
            return screen("link-expired", "Link expired", "This link was not opened within its minute. Ask the application for a new one.", false);
        if (k === "portal-session-revoked" || k === "portal-session-expired")
            return ended(k);
        return screen("link-invalid", "Link not valid", "This link is not one this portal gave. Ask the application for a new one.", false);
    }
    if (got.tenant_id !== tenantInPath) {
        return screen("link-invalid", "Link not valid", "This link belongs to another portal address. Ask the application for a new one.", false);
    }
    token = got.token;
    session = got;
    const left = new Date(got.expires_at).getTime() - Date.now();
    expiryTimer = window.setTimeout(() => ended("portal-session-expired"), Math.max(0, Math.min(left, 2 ** 31 - 1)));
    const bar = document.getElementById("bar");
    bar.hidden = false;
    document.getElementById("who").textContent =
        `${got.actor} · ${got.tenant_id} · until ${new Date(got.expires_at).toLocaleTimeString()}`;
    route();
}
// ---- routing: #/view/arg, or #/view?query ----
function route() {
    clearInterval(refreshTimer);
    if (!token)
        return;
    const [where, query] = location.hash.replace(/^#\/?/, "").split("?");
    const [view, arg] = where.split("/").map(decodeURIComponent);
    for (const a of document.querySelectorAll("[data-nav]"))
        a.classList.toggle("active", a.dataset.nav === view);
    switch (view) {
        case "endpoints":
            void guard(() => (arg ? endpointView(arg) : endpointsView()));
            return;
        case "events":
            void guard(() => eventsView(arg, new URLSearchParams(query ?? "")));
            return;
        case "event-types":
            void guard(() => eventTypesView());
            return;
        case "correlations":
            void guard(() => correlationView(arg ?? ""));
            return;
        case "dead-letters":
            void guard(() => deadLettersView());
            return;
        default:
            location.hash = "#/endpoints";
    }
}
window.addEventListener("hashchange", () => {
    if (location.hash.startsWith("#code="))
        void start();
    else
        route();
});
// ---- endpoints ----
function circuitBadge(hl) {
    if (!hl)
        return h("span", { class: "badge" }, "—");
    const st = hl.circuit.state;
    return h("span", { class: "badge " + (st === "closed" ? "ok" : st === "open" ? "bad" : "warn"), "data-circuit": st }, `circuit ${st.replace("_", " ")}`);
}
function healthText(hl) {
    if (!hl || hl.success_rate === null || hl.success_rate === undefined)
        return "no attempts in the last hour";
    return `${Math.round(hl.success_rate * 100)} % of ${hl.attempts} attempts delivered in the last hour`;
}
// outcomesChart draws the last hour's attempts by outcome as bars.
function outcomesChart(hl) {
    const bars = h("div", { class: "bars", title: "delivered, retried, refused, gone (last hour)" });
    if (!hl)
        return bars;
    const o = hl.outcomes;
    const top = Math.max(1, o.delivered, o.retry, o.permanent, o.gone);
    const colors = ["#37b24d", "#f59f00", "#e03131", "#862e9c"];
    [o.delivered, o.retry, o.permanent, o.gone].forEach((n, i) => {
        const bar = h("span", { title: String(n) });
        bar.style.height = `${Math.max(2, Math.round((24 * n) / top))}px`;
        bar.style.background = colors[i];
        bars.append(bar);
    });
    return bars;
}
// brokers are the inputs of each broker type (api/openapi.json's
// EndpointCreate config and credentials), with a word on each where the
// inputs cannot say it (about: the config; login: the credentials). The
// API judges what is sent: an input left empty is left out.
const brokers = {
    nats: {
        config: [
            { key: "url", label: "URL", placeholder: "nats://nats.example.com:4222" },
            { key: "subject", label: "Subject prefix", placeholder: "orders" },
            { key: "stream", label: "Stream (optional)", placeholder: "ORDERS" },
        ],
        credentials: [{ key: "username", label: "Username" }, { key: "password", label: "Password" }, { key: "token", label: "Token" }],
        about: "The JetStream stream capturing <subject>.> must exist; hookflow creates none.",
        login: "A username and password, or a token.",
    },
    redis: {
        config: [
            { key: "addr", label: "Address", placeholder: "redis.example.com:6379" },
            { key: "stream", label: "Stream prefix", placeholder: "orders" },
            { key: "tls", label: "TLS", kind: "checkbox" },
            { key: "db", label: "Database (optional)", kind: "number", placeholder: "0" },
        ],
        credentials: [{ key: "username", label: "Username (optional, with ACLs)" }, { key: "password", label: "Password" }],
        about: "Each lane is written to the stream {<prefix>}:<correlation>.",
        login: "The password, and the username where ACLs are used.",
    },
    rabbitmq: {
        config: [
            { key: "url", label: "URL", placeholder: "amqps://rabbit.example.com:5671/vhost" },
            { key: "exchange", label: "Exchange", placeholder: "orders" },
        ],
        credentials: [{ key: "username", label: "Username" }, { key: "password", label: "Password" }],
        about: "The exchange must exist; the routing key is the correlation.",
        login: "The username and password.",
    },
};
function isBroker(t) {
    return t !== undefined && t !== "webhook";
}
// configInput is one config setting's input, named as the API names
// the field ("config.url"), so a refusal can point at it.
function configInput(s) {
    const name = "config." + s.key;
    if (s.kind === "checkbox")
        return h("label", { class: "check" }, h("input", { type: "checkbox", name }), s.label);
    return h("label", {}, s.label, h("input", { name, placeholder: s.placeholder ?? "", type: s.kind === "number" ? "number" : "text" }));
}
// credentialInputs are password inputs: what is typed is never shown,
// and no browser offers to fill in or keep it.
function credentialInputs(t) {
    return brokers[t].credentials.map((s) => h("label", {}, s.label, h("input", { type: "password", name: "credentials." + s.key, autocomplete: "new-password" })));
}
// brokerConfig reads a broker form's config: text as typed (trimmed),
// a checkbox as true when ticked, a number as a number; empty ones left
// out.
function brokerConfig(form, t) {
    const out = {};
    for (const s of brokers[t].config) {
        const el = form.elements.namedItem("config." + s.key);
        if (!el)
            continue;
        if (s.kind === "checkbox") {
            if (el.checked)
                out[s.key] = true;
        }
        else if (el.value.trim()) {
            out[s.key] = s.kind === "number" ? Number(el.value) : el.value.trim();
        }
    }
    return out;
}
// brokerCredentials reads a form's credentials as typed (a password may
// start or end with a space), the empty ones left out.
function brokerCredentials(form, t) {
    const out = {};
    for (const s of brokers[t].credentials) {
        const v = form.elements.namedItem("credentials." + s.key)?.value ?? "";
        if (v)
            out[s.key] = v;
    }
    return out;
}
function configText(v) {
    return typeof v === "string" ? v : JSON.stringify(v);
}
// credentialNames says which credentials an endpoint holds: the API
// answers their names only, each value "********".
function credentialNames(ep) {
    const names = Object.keys(ep.credentials ?? {});
    return names.length ? names.join(", ") : "none";
}
// destinationCell is the list's word on where an endpoint delivers: a
// webhook's URL; a broker's address, its config as stored and its
// credentials' names.
function destinationCell(ep) {
    const td = h("td", { class: "mono" }, ep.url);
    if (!isBroker(ep.type))
        return td;
    td.append(h("div", { class: "config muted", "data-config": JSON.stringify(ep.config ?? {}) }, Object.entries(ep.config ?? {}).map(([k, v]) => `${k}=${configText(v)}`).join(" · ")));
    td.append(h("div", { class: "muted", "data-credentials": Object.keys(ep.credentials ?? {}).join(",") }, `credentials: ${credentialNames(ep)}`));
    return td;
}
function typeBadge(t) {
    const typ = t ?? "webhook";
    return h("span", { class: "badge type", "data-type": typ }, typ);
}
// filterExample is what the editor offers: a JSON match over the event's
// data and metadata (docs/filters.md).
const filterExample = `{"data": {"amount": {"$gte": 1000}}, "metadata": {"region": "eu"}}`;
function filterEditor(current, id) {
    const area = h("textarea", { name: "filter", rows: current ? "4" : "2", cols: "60", spellcheck: "false", placeholder: filterExample,
        "aria-describedby": id + "-hint" });
    area.value = current ? JSON.stringify(current, null, 2) : "";
    const problem = h("div", { id: id + "-problem" });
    const el = h("div", { class: "filter-editor" }, h("label", {}, "Filter (JSON, optional)", area), h("p", { class: "muted note", id: id + "-hint" }, "Only the events of its types whose data and metadata match (empty: all), e.g. ", h("code", {}, filterExample), " · $eq $neq $gt $gte $lt $lte $in $nin $exists $prefix $and $or $not"), problem);
    return { el, area, problem };
}
// FilterSyntax is a filter that is not JSON: refused in the page, as the
// API would, before anything is sent.
class FilterSyntax extends Error {
}
// readFilter is the editor's filter: null when it is empty (no filter).
function readFilter(ed) {
    const raw = ed.area.value.trim();
    if (!raw)
        return null;
    try {
        return JSON.parse(raw);
    }
    catch (err) {
        throw new FilterSyntax(`not JSON (${err instanceof Error ? err.message : String(err)})`);
    }
}
function isFilterField(f) {
    return f === "filter" || (f ?? "").startsWith("filter.") || (f ?? "").startsWith("filter[");
}
// filterRefused shows err beside the editor when it is about the filter,
// as "path: why", and marks the textarea; false when it is about
// something else, for the caller to show.
function filterRefused(ed, err) {
    ed.area.removeAttribute("aria-invalid");
    ed.problem.replaceChildren();
    let field, detail;
    if (err instanceof FilterSyntax) {
        [field, detail] = ["filter", err.message];
    }
    else if (err instanceof ApiError && isFilterField(err.problem.field)) {
        [field, detail] = [err.problem.field, err.message];
    }
    else {
        return false;
    }
    ed.area.setAttribute("aria-invalid", "true");
    ed.problem.append(h("div", { class: "error", role: "alert", id: "filter-error", "data-field": field }, `${field}: ${detail}`));
    return true;
}
// filterCell shows an endpoint's filter as stored (compact JSON, keys
// sorted), or that it takes every event of its types.
function filterCell(ep) {
    const raw = ep.filter ? JSON.stringify(ep.filter) : "";
    return h("td", { "data-filter": raw }, raw ? h("code", { class: "filter" }, raw) : h("span", { class: "muted" }, "none"));
}
// filterForm edits an endpoint's filter with PATCH: what is saved
// replaces it, and Remove filter (or saving it empty) sends null, so the
// endpoint takes every event of its types again. A refused filter leaves
// the stored one as it was, and the text as typed, to be corrected.
function filterForm(ep) {
    const id = ep.id;
    const ed = filterEditor(ep.filter, "edit-filter");
    const save = async (filter, done) => {
        await call("endpointUpdate", 200, { id, body: { filter } });
        await endpointView(id);
        document.getElementById("message")?.replaceChildren(h("p", { class: "badge ok", id: "filter-saved" }, done));
    };
    const form = h("form", { id: "edit-filter" }, ed.el, h("div", { class: "actions" }, h("button", { type: "submit" }, "Save filter")));
    const buttons = form.querySelector(".actions");
    const run = async (btn, next) => {
        btn.disabled = true;
        // A "saved" from before must not stand beside this one's refusal.
        document.getElementById("message")?.replaceChildren();
        filterRefused(ed, null);
        try {
            await next();
        }
        catch (err) {
            if (!(err instanceof Ended) && !filterRefused(ed, err))
                ed.problem.replaceChildren(errorBox(err));
        }
        finally {
            btn.disabled = false;
        }
    };
    form.addEventListener("submit", (e) => {
        e.preventDefault();
        void run(form.querySelector("button[type=submit]"), async () => {
            const f = readFilter(ed);
            await save(f, f ? "Filter saved" : "Filter removed");
        });
    });
    if (ep.filter) {
        const remove = h("button", { type: "button", class: "secondary", "data-action": "remove-filter" }, "Remove filter");
        remove.addEventListener("click", () => void run(remove, () => save(null, "Filter removed")));
        buttons.append(remove);
    }
    return form;
}
async function endpointsView() {
    const [page, health] = await Promise.all([
        call("endpointList", 200, { query: { limit: "100" } }),
        call("statsEndpoints", 200, { query: { limit: "100" } }),
    ]);
    const byID = new Map(health.endpoints.map((e) => [e.endpoint_id, e]));
    const rows = page.items.map((ep) => {
        const hl = byID.get(ep.id);
        return h("tr", { "data-endpoint": ep.id }, h("td", {}, h("a", { href: `#/endpoints/${encodeURIComponent(ep.id)}` }, h("code", {}, ep.id))), h("td", {}, typeBadge(ep.type)), destinationCell(ep), h("td", {}, (ep.event_types ?? ["*"]).join(", ")), filterCell(ep), h("td", {}, ep.disabled ? h("span", { class: "badge warn" }, "disabled") : h("span", { class: "badge ok" }, "enabled")), h("td", {}, circuitBadge(hl), " ", h("span", { class: "muted" }, healthText(hl))), h("td", {}, outcomesChart(hl)), h("td", {}, hl ? String(hl.dead_letters_open) : "—"));
    });
    const created = h("div", { id: "created" });
    show(h("h1", {}, "Endpoints"), h("table", { id: "endpoints" }, h("thead", {}, h("tr", {}, ...["Endpoint", "Type", "Destination", "Event types", "Filter", "State", "Health", "Outcomes", "Open dead letters"].map((t) => h("th", {}, t)))), h("tbody", {}, ...rows)), page.items.length === 0 ? h("p", { class: "muted" }, "No endpoints yet.") : null, can("endpoints:manage") && can("endpoints:secret") && !session?.endpoint_ids ? createForm(created) : null, created);
}
function field(name, label, value = "", placeholder = "") {
    return h("label", {}, label, h("input", { name, value, placeholder }));
}
function formValue(form, name) {
    return (form.elements.namedItem(name)?.value ?? "").trim();
}
// parseHeaders reads the headers editor: one "Name: value" a line, blank
// lines ignored; null for none (the API then removes them all). A line
// without a colon is refused here, naming it; the API checks the rest.
function parseHeaders(raw) {
    const out = {};
    for (const line of raw.split("\n").map((l) => l.trim()).filter(Boolean)) {
        const at = line.indexOf(":");
        if (at < 1)
            throw new Error(`"${line}" is not a header: write Name: value`);
        out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
    }
    return Object.keys(out).length ? out : null;
}
// headersForm replaces an endpoint's custom headers. Their values are
// write-only (the API shows each as ********), so the editor starts empty
// and lists the names set: what it sends replaces them all, and sending
// nothing removes them.
function headersForm(id, current, msg) {
    const names = Object.keys(current ?? {});
    const area = h("textarea", { name: "headers", rows: "3", cols: "48", placeholder: "X-Api-Key: value" });
    const form = h("form", { id: "edit-headers" }, h("p", { class: "muted" }, names.length ? `Set now: ${names.join(", ")} (values hidden). ` : "No custom headers. ", "What you send replaces them all; send nothing to remove them."), area, " ", h("button", { type: "submit" }, "Replace headers"));
    form.addEventListener("submit", async (e) => {
        e.preventDefault();
        try {
            await call("endpointUpdate", 200, { id, body: { headers: parseHeaders(area.value) } });
            await endpointView(id);
            document.getElementById("message")?.replaceChildren(h("p", { class: "badge ok", id: "headers-saved" }, "Headers replaced"));
        }
        catch (err) {
            if (!(err instanceof Ended))
                msg.replaceChildren(errorBox(err));
        }
    });
    return form;
}
function types(raw) {
    const list = raw.split(",").map((s) => s.trim()).filter(Boolean);
    return list.length ? list : undefined;
}
// createForm registers an endpoint and shows its secret once: the page
// keeps it nowhere, and no answer shows it again. Its type picks what
// says where the endpoint is: a webhook's URL, or a broker's config and
// credentials (which the API checks by reaching the broker).
function createForm(out) {
    const select = h("select", { name: "type" }, ...["webhook", "nats", "redis", "rabbitmq"].map((t) => h("option", { value: t }, t)));
    const where = h("div", { class: "destination" });
    const filter = filterEditor(undefined, "create-filter");
    const form = h("form", { class: "inline", id: "create-endpoint" }, h("label", {}, "Type", select), where, field("event_types", "Event types (comma-separated)", "", "order.*"), filter.el, h("button", { type: "submit" }, "Create endpoint"));
    const swap = () => {
        const t = select.value;
        if (!isBroker(t)) {
            where.replaceChildren(field("url", "URL", "", "https://example.com/webhooks"));
            return;
        }
        where.replaceChildren(h("fieldset", { "data-config": t }, h("legend", {}, `${t} config`), ...brokers[t].config.map(configInput)), h("fieldset", { "data-credentials": t }, h("legend", {}, "Credentials"), ...credentialInputs(t)), h("p", { class: "muted note" }, `${brokers[t].about} ${brokers[t].login}`));
    };
    select.addEventListener("change", () => {
        swap();
        out.replaceChildren();
    });
    swap();
    form.addEventListener("submit", async (e) => {
        e.preventDefault();
        const btn = form.querySelector("button");
        btn.disabled = true;
        const t = select.value;
        const event_types = types(formValue(form, "event_types"));
        for (const el of form.querySelectorAll("[aria-invalid]"))
            el.removeAttribute("aria-invalid");
        filterRefused(filter, null);
        try {
            const body = isBroker(t)
                ? { type: t, config: brokerConfig(form, t), credentials: brokerCredentials(form, t), event_types }
                : { url: formValue(form, "url"), event_types };
            const f = readFilter(filter);
            if (f)
                body.filter = f;
            const ep = await call("endpointCreate", 201, { body });
            await endpointsView();
            document.getElementById("created")?.replaceChildren(secretBox(ep.id, ep.secret, "created"));
        }
        catch (err) {
            if (err instanceof Ended)
                return;
            if (filterRefused(filter, err)) {
                out.replaceChildren();
                return;
            }
            refused(form, out, err);
        }
        finally {
            btn.disabled = false;
        }
    });
    return h("div", {}, h("h2", {}, "New endpoint"), form);
}
function secretBox(id, secret, what) {
    return h("div", { class: "secret", id: "secret" }, h("p", {}, `Endpoint `, h("code", {}, id), ` ${what}. Its signing secret is shown this once: copy it to your receiver now.`), h("code", { id: "secret-value" }, secret));
}
async function endpointView(id) {
    const [ep, hl] = await Promise.all([call("endpointGet", 200, { id }), call("endpointStats", 200, { id })]);
    const msg = h("div", { id: "message" });
    const manage = can("endpoints:manage");
    const act = (label, cls, run) => {
        const b = h("button", { class: cls, type: "button", "data-action": label.toLowerCase().replace(/ /g, "-") }, label);
        b.addEventListener("click", async () => {
            b.disabled = true;
            try {
                await run();
            }
            catch (err) {
                if (!(err instanceof Ended))
                    msg.replaceChildren(errorBox(err));
            }
            finally {
                b.disabled = false;
            }
        });
        return b;
    };
    const actions = h("div", { class: "actions" });
    if (manage) {
        actions.append(ep.disabled
            ? act("Enable", "secondary", async () => { await call("endpointUpdate", 200, { id, body: { disabled: false } }); await endpointView(id); })
            : act("Disable", "secondary", async () => { await call("endpointUpdate", 200, { id, body: { disabled: true } }); await endpointView(id); }));
        if (can("endpoints:secret")) {
            actions.append(act("Rotate secret", "secondary", async () => {
                const r = await call("endpointRotateSecret", 200, { id });
                await endpointView(id);
                document.getElementById("message")?.replaceChildren(secretBox(r.id, r.secret, "has a new secret (the old one signs too until its grace ends)"));
            }));
        }
        // Delete asks twice, in the page: a dialog would block the page.
        const del = act("Delete", "danger", async () => {
            if (del.dataset.armed !== "1") {
                del.dataset.armed = "1";
                del.textContent = "Delete for good?";
                return;
            }
            await call("endpointDelete", 200, { id });
            location.hash = "#/endpoints";
        });
        actions.append(del);
    }
    if (can("events:test") && !ep.disabled) {
        actions.append(act("Send test event", "secondary", async () => {
            const sent = await call("endpointTest", 202, { id });
            await followTest(sent.id, sent.state, msg);
        }));
    }
    const edit = h("form", { class: "inline", id: "edit-endpoint" }, field("event_types", "Event types", (ep.event_types ?? []).join(", "), "* (all)"), field("recovery_window", "Recovery window", ep.recovery_window ?? "", "server default"), field("timeout", "Timeout", ep.timeout ?? "", "server default"), field("rate_limit", "Rate limit (/s)", ep.rate_limit == null ? "" : String(ep.rate_limit), "none"), h("button", { type: "submit" }, "Save"));
    edit.addEventListener("submit", async (e) => {
        e.preventDefault();
        const rate = formValue(edit, "rate_limit");
        try {
            await call("endpointUpdate", 200, { id, body: {
                    event_types: types(formValue(edit, "event_types")) ?? null,
                    recovery_window: formValue(edit, "recovery_window") || null,
                    timeout: formValue(edit, "timeout") || null,
                    rate_limit: rate ? Number(rate) : null,
                } });
            await endpointView(id);
            document.getElementById("message")?.replaceChildren(h("p", { class: "badge ok" }, "Saved"));
        }
        catch (err) {
            if (!(err instanceof Ended))
                msg.replaceChildren(errorBox(err));
        }
    });
    show(h("h1", {}, "Endpoint ", h("code", {}, ep.id)), h("p", { class: "mono" }, ep.url), h("p", {}, ep.disabled ? h("span", { class: "badge warn" }, "disabled") : h("span", { class: "badge ok" }, "enabled"), " ", circuitBadge(hl), " ", h("span", { class: "muted" }, healthText(hl))), h("h2", {}, "Last 24 hours"), dayChart(hl.hourly ?? []), h("table", {}, h("tbody", {}, ...destinationRows(ep), h("tr", {}, h("th", {}, "Event types"), h("td", {}, (ep.event_types ?? ["*"]).join(", "))), h("tr", {}, h("th", {}, "Filter"), h("td", { id: "endpoint-filter", "data-filter": ep.filter ? JSON.stringify(ep.filter) : "" }, ep.filter ? h("pre", { class: "sample mono" }, JSON.stringify(ep.filter)) : h("span", { class: "muted" }, "none: every event of its types"))), h("tr", {}, h("th", {}, "Recovery window"), h("td", {}, ep.recovery_window ?? "server default")), h("tr", {}, h("th", {}, "Timeout"), h("td", {}, ep.timeout ?? "server default")), h("tr", {}, h("th", {}, "Rate limit"), h("td", {}, ep.rate_limit == null ? "none" : `${ep.rate_limit}/s`)), h("tr", {}, h("th", {}, "Waiting / delivering"), h("td", {}, `${hl.waiting} / ${hl.delivering}`)), h("tr", {}, h("th", {}, "Open dead letters"), h("td", {}, h("a", { href: "#/dead-letters" }, String(hl.dead_letters_open)))))), actions, msg, manage ? h("div", {}, h("h2", {}, "Settings"), edit, h("h2", {}, "Filter"), filterForm(ep), ...(isBroker(ep.type)
        // A broker's message has no HTTP headers of a user's: its
        // credentials are what a rotation replaces.
        ? [h("h2", {}, "Credentials"), credentialsForm(id, ep.type, msg)]
        : [h("h2", {}, "Custom headers"), headersForm(id, ep.headers, msg)])) : null);
}
// destinationRows are the endpoint's type and, for a broker, its config
// as stored, each setting a row, and its credentials' names.
function destinationRows(ep) {
    const rows = [h("tr", {}, h("th", {}, "Type"), h("td", { id: "endpoint-type" }, typeBadge(ep.type)))];
    if (!isBroker(ep.type))
        return rows;
    for (const [k, v] of Object.entries(ep.config ?? {})) {
        rows.push(h("tr", { "data-config": k }, h("th", {}, `Config ${k}`), h("td", { class: "mono" }, configText(v))));
    }
    rows.push(h("tr", {}, h("th", {}, "Credentials"), h("td", { id: "credential-names", "data-credentials": Object.keys(ep.credentials ?? {}).join(",") }, `${credentialNames(ep)} (values hidden)`)));
    return rows;
}
// credentialsForm replaces a broker endpoint's credentials whole: the
// API reaches the broker with the new ones before it keeps them, so the
// broker must take them first. Like a signing secret, what is typed is
// never shown back.
function credentialsForm(id, t, msg) {
    const form = h("form", { class: "inline", id: "rotate-credentials" }, h("p", { class: "muted" }, "New credentials replace all the ones set now. ", brokers[t].login), ...credentialInputs(t), h("button", { type: "submit" }, "Rotate credentials"));
    form.addEventListener("submit", async (e) => {
        e.preventDefault();
        const btn = form.querySelector("button");
        btn.disabled = true;
        try {
            await call("endpointUpdate", 200, { id, body: { credentials: brokerCredentials(form, t) } });
            await endpointView(id);
            document.getElementById("message")?.replaceChildren(h("p", { class: "badge ok", id: "credentials-saved" }, "Credentials replaced"));
        }
        catch (err) {
            if (!(err instanceof Ended))
                refused(form, msg, err);
        }
        finally {
            btn.disabled = false;
        }
    });
    return form;
}
// followTest shows a test event arriving: its state, polled from GET
// /v1/events/{id} once a second until it is delivered or dead-lettered,
// or the page moved elsewhere, or a minute passed.
async function followTest(eventID, first, msg) {
    const here = location.hash;
    const line = (state) => msg.replaceChildren(h("p", { id: "test-event", "data-state": state }, "Test event ", h("a", { href: `#/events/${encodeURIComponent(eventID)}` }, h("code", {}, eventID)), " ", stateBadge(state)));
    line(first);
    for (let i = 0; i < 60 && location.hash === here; i++) {
        const ev = await call("eventGet", 200, { id: eventID });
        line(ev.state);
        if (ev.state === "delivered" || ev.state === "dead_lettered" || ev.state === "skipped")
            return;
        await new Promise((r) => setTimeout(r, 1000));
    }
}
// dayChart draws the endpoint's last 24 hours by the hour: one column an
// hour, stacked by outcome (delivered, retried, refused, gone), scaled to
// the busiest hour; each column's title says its figures.
function dayChart(hours) {
    const day = h("div", { class: "day", id: "day-chart", title: "the last 24 hours: delivered, retried, refused, gone" });
    const top = Math.max(1, ...hours.map((x) => x.delivered + x.retry + x.permanent + x.gone));
    const colors = ["#37b24d", "#f59f00", "#e03131", "#862e9c"];
    for (const x of hours) {
        const n = [x.delivered, x.retry, x.permanent, x.gone];
        const col = h("div", { class: "hour", "data-attempts": String(n.reduce((a, b) => a + b, 0)),
            title: `${new Date(x.hour).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}: ${n[0]} delivered, ${n[1]} retried, ${n[2]} refused, ${n[3]} gone` });
        n.forEach((v, i) => {
            if (!v)
                return;
            const seg = h("span", {});
            seg.style.height = `${Math.max(1, Math.round((48 * v) / top))}px`;
            seg.style.background = colors[i];
            col.append(seg);
        });
        day.append(col);
    }
    return day;
}
// ---- events and correlations ----
function stateBadge(state) {
    const cls = state === "delivered" ? "ok" : state === "dead_lettered" ? "bad" : state === "skipped" ? "" : "warn";
    return h("span", { class: "badge " + cls, "data-state": state }, state.replace("_", " "));
}
function searchForm() {
    const form = h("form", { class: "inline", id: "search" }, field("q", "Event ID or correlation ID"), h("button", { type: "submit", name: "event" }, "Find event"), h("button", { type: "submit", name: "correlation", class: "secondary" }, "Find correlation"));
    form.addEventListener("submit", (e) => {
        e.preventDefault();
        const q = formValue(form, "q");
        const which = e.submitter?.name ?? "event";
        if (q)
            location.hash = `#/${which === "correlation" ? "correlations" : "events"}/${encodeURIComponent(q)}`;
    });
    return form;
}
// logForm filters the event log by correlation and type: its query rides
// in the address (#/events?correlation_id=…&type=…), so a search can be
// linked and reloaded.
function logForm(q) {
    const form = h("form", { class: "inline", id: "log-search" }, field("correlation_id", "Correlation", q.get("correlation_id") ?? ""), field("type", "Type", q.get("type") ?? "", "order.updated"), h("button", { type: "submit" }, "Search"));
    form.addEventListener("submit", (e) => {
        e.preventDefault();
        const next = new URLSearchParams();
        for (const k of ["correlation_id", "type"])
            if (formValue(form, k))
                next.set(k, formValue(form, k));
        location.hash = "#/events" + (next.size ? "?" + next.toString() : "");
    });
    return form;
}
function logRow(ev) {
    return h("tr", { "data-event": ev.id }, h("td", {}, new Date(ev.accepted_at).toLocaleString()), h("td", {}, h("a", { href: `#/events/${encodeURIComponent(ev.id)}` }, h("code", {}, ev.id))), h("td", {}, ev.type), h("td", {}, h("a", { href: `#/correlations/${encodeURIComponent(ev.correlation_id)}` }, ev.correlation_id)), h("td", {}, ev.sequence), h("td", {}, stateBadge(ev.state)), h("td", { class: "mono" }, ev.deliveries.map((d) => d.endpoint_id).join(", ") || "—"));
}
// eventLog is the Events view without an ID: the log, newest first, by
// correlation and type, a page at a time.
async function eventLog(q) {
    const query = { correlation_id: q.get("correlation_id") ?? undefined, type: q.get("type") ?? undefined, limit: "50" };
    const page = await call("eventList", 200, { query });
    const body = h("tbody", {}, ...page.items.map(logRow));
    const more = h("div", {});
    const next = (cursor) => {
        more.replaceChildren();
        if (!cursor)
            return;
        const b = h("button", { type: "button", class: "secondary", id: "log-more" }, "More");
        b.addEventListener("click", async () => {
            b.disabled = true;
            try {
                const p = await call("eventList", 200, { query: { ...query, cursor } });
                body.append(...p.items.map(logRow));
                next(p.next_cursor);
            }
            catch (err) {
                if (!(err instanceof Ended))
                    more.replaceChildren(errorBox(err));
            }
        });
        more.append(b);
    };
    next(page.next_cursor);
    show(h("h1", {}, "Events"), searchForm(), logForm(q), page.items.length === 0 ? h("p", { class: "muted", id: "log-empty" }, "No events.") :
        h("table", { id: "event-log" }, h("thead", {}, h("tr", {}, ...["Accepted", "Event", "Type", "Correlation", "Seq", "State", "Endpoints"].map((t) => h("th", {}, t)))), body), more);
}
// eventTypesView lists the tenant's event types: each seen with its
// latest event and that event's payload as a sample (a type catalogued but
// not seen yet shows its catalog example instead), and each catalogued
// with the schema its events are validated against (version and schema):
// what a receiver is written against.
async function eventTypesView() {
    const page = await call("eventTypeList", 200);
    show(h("h1", {}, "Event types"), page.items.length === 0 ? h("p", { class: "muted", id: "types-empty" }, "No events yet.") :
        h("table", { id: "event-types" }, h("thead", {}, h("tr", {}, ...["Type", "Last seen", "Sample payload", "Schema"].map((t) => h("th", {}, t)))), h("tbody", {}, ...page.items.map((t) => h("tr", { "data-type": t.type }, h("td", {}, h("a", { href: `#/events?type=${encodeURIComponent(t.type)}` }, t.type)), h("td", {}, t.last_event_id !== undefined && t.last_seen_at !== undefined ?
            h("a", { href: `#/events/${encodeURIComponent(t.last_event_id)}` }, new Date(t.last_seen_at).toLocaleString()) :
            h("span", { class: "muted" }, "never")), h("td", {}, t.sample !== undefined ? h("pre", { class: "sample mono" }, JSON.stringify(t.sample, null, 2)) :
            t.catalog?.example !== undefined ? h("div", {}, h("span", { class: "muted" }, "the catalog's example"), h("pre", { class: "sample mono" }, JSON.stringify(t.catalog.example, null, 2))) :
                h("span", { class: "muted" }, t.last_event_id === undefined ? "—" :
                    t.sample_bytes ? `larger than a sample (${t.sample_bytes} bytes)` : "payload pruned")), h("td", { class: "schema" }, t.catalog === undefined ? h("span", { class: "muted" }, "not catalogued") :
            h("details", {}, h("summary", {}, `version ${t.catalog.version}`, t.catalog.description ? ` · ${t.catalog.description}` : ""), h("pre", { class: "mono" }, JSON.stringify(t.catalog.schema, null, 2)))))))), page.more ? h("p", { class: "muted" }, "More types than these exist.") : null);
}
async function eventsView(id, q) {
    if (!id)
        return eventLog(q);
    const ev = await call("eventGet", 200, { id });
    show(h("h1", {}, "Event ", h("code", {}, ev.id)), searchForm(), h("p", {}, stateBadge(ev.state), " ", ev.type, " · correlation ", h("a", { href: `#/correlations/${encodeURIComponent(ev.correlation_id)}` }, ev.correlation_id), ` · sequence ${ev.sequence}`, ` · accepted ${new Date(ev.accepted_at).toLocaleString()}`), ev.metadata ? h("section", { id: "event-metadata" }, h("h2", {}, "Metadata"), h("pre", { class: "sample mono" }, JSON.stringify(ev.metadata, null, 2))) : null, ev.unrouted ? routingNote(ev.filtered_out ?? []) : null, ...ev.deliveries.map((d) => h("section", { "data-delivery": d.endpoint_id }, h("h2", {}, "To ", h("a", { href: `#/endpoints/${encodeURIComponent(d.endpoint_id)}` }, h("code", {}, d.endpoint_id)), " ", stateBadge(d.state), d.delivered_at ? h("span", { class: "muted" }, ` at ${new Date(d.delivered_at).toLocaleTimeString()}`) : null), h("table", {}, h("thead", {}, h("tr", {}, ...["#", "Started", "Outcome", "Status", "Latency", "Answer"].map((t) => h("th", {}, t)))), h("tbody", {}, ...d.attempts.map((a) => h("tr", {}, h("td", {}, a.attempt), h("td", {}, new Date(a.started_at).toLocaleTimeString()), h("td", {}, a.outcome), h("td", {}, a.status_code ?? "—"), h("td", {}, `${a.latency_ms} ms`), h("td", { class: "mono" }, a.error ?? ""))))))), leftOut(ev.filtered_out ?? []));
}
// routingNote says why an event has no deliveries: an event every filter
// left out is told apart from one no endpoint was subscribed to. A session
// limited to some endpoints is never shown an event none of them took (the
// API answers 404), so it meets neither.
function routingNote(filteredOut) {
    const note = (routing, badge, text) => h("p", { id: "routing", "data-routing": routing }, h("span", { class: "badge" }, badge), " ", text);
    const limited = session?.endpoint_ids !== undefined;
    if (filteredOut.length) {
        return note("filtered", "left out by every filter", "No endpoint took it: each one subscribed to its type has a filter that left it out when it was accepted, so there was nothing to deliver.");
    }
    return note("unrouted", "unrouted", `${limited ? "None of this session's endpoints" : "No endpoint"} was subscribed to its type when it was accepted, so there was nothing to deliver.`);
}
// leftOut lists the endpoints subscribed to an event's type whose filter
// left it out: none of them has a delivery of it, and the next event
// each takes names the one before it in that lane as previous.
function leftOut(ids) {
    if (!ids.length)
        return null;
    return h("section", { id: "filtered-out" }, h("h2", {}, "Left out by a filter"), h("p", { class: "muted" }, "Subscribed to its type, but their filter did not match it when it was accepted: it never entered their lanes."), h("ul", {}, ...ids.map((id) => h("li", { "data-filtered-out": id }, h("a", { href: `#/endpoints/${encodeURIComponent(id)}` }, h("code", {}, id))))));
}
function laneBlock(l) {
    if (!l.blocked_by)
        return "not blocked";
    return `blocked by ${l.blocked_by.sequence} (${l.blocked_by.state.replace("_", " ")})`;
}
async function correlationView(id) {
    const c = await call("correlationGet", 200, { id });
    show(h("h1", {}, "Correlation ", h("code", {}, c.correlation_id)), searchForm(), h("p", {}, `Next sequence ${c.next_sequence}`, c.missing ? ` · ${c.missing} has not arrived` : "", c.voided.length ? ` · voided ${c.voided.join(", ")}` : ""), h("table", { id: "lanes" }, h("thead", {}, h("tr", {}, ...["Lane (endpoint)", "Delivered through", "Next", "In flight", "Parked", "Blocked"].map((t) => h("th", {}, t)))), h("tbody", {}, ...c.lanes.map((l) => h("tr", { "data-lane": l.endpoint_id }, h("td", {}, h("a", { href: `#/endpoints/${encodeURIComponent(l.endpoint_id)}` }, h("code", {}, l.endpoint_id))), h("td", { "data-delivered-through": String(l.previous_sequence) }, l.previous_sequence || "—"), h("td", {}, l.next ?? "—"), h("td", {}, l.released ?? "—"), h("td", { "data-parked": l.parked.join(",") }, l.parked.length ? l.parked.join(", ") + (l.parked_more ? " …" : "") : "none"), h("td", { class: "blocked" }, laneBlock(l)))))), h("p", { class: "muted" }, "Refreshes every 2 seconds."));
    // The lanes move as events arrive and are delivered: keep them current
    // while this view is open (route clears it).
    clearInterval(refreshTimer);
    refreshTimer = window.setInterval(() => {
        if (location.hash.startsWith("#/correlations/"))
            void guard(() => correlationView(id));
    }, 2000);
}
// ---- dead letters ----
async function deadLettersView() {
    const page = await call("deadLetterList", 200, { query: { status: "open", limit: "100" } });
    const write = can("dead-letters:write");
    const msg = h("div", { id: "message" });
    const rows = page.items.map((d) => {
        const cells = [
            h("td", {}, h("a", { href: `#/events/${encodeURIComponent(d.event_id)}` }, h("code", {}, d.event_id))),
            h("td", {}, h("a", { href: `#/correlations/${encodeURIComponent(d.correlation_id)}` }, d.correlation_id), ` #${d.sequence}`),
            h("td", {}, h("code", {}, d.endpoint_id)),
            h("td", {}, d.reason),
            h("td", {}, d.attempt_count),
            h("td", {}, new Date(d.dead_lettered_at).toLocaleString()),
        ];
        const row = h("tr", { "data-dead-letter": d.event_id, "data-endpoint": d.endpoint_id }, ...cells);
        if (write)
            row.append(h("td", { class: "actions" }, ...dlButtons(d, msg)));
        return row;
    });
    const endpoints = [...new Set(page.items.map((d) => d.endpoint_id))].sort();
    show(h("h1", {}, "Dead letters"), h("p", { class: "muted" }, "Each holds its lane until it is replayed or skipped; the lane then goes on in order."), write && endpoints.length ? h("div", { class: "actions", id: "bulk" }, ...endpoints.map((ep) => bulkReplay(ep, page.items.filter((d) => d.endpoint_id === ep).length, msg))) : null, msg, h("table", { id: "dead-letters" }, h("thead", {}, h("tr", {}, ...["Event", "Correlation", "Endpoint", "Reason", "Attempts", "Dead-lettered", write ? "" : null].filter((t) => t !== null).map((t) => h("th", {}, t)))), h("tbody", {}, ...rows)), page.items.length === 0 ? h("p", { class: "muted", id: "no-dead-letters" }, "No open dead letters.") : null);
}
// bulkReplay replays every open dead letter of one endpoint, each lane in
// sequence order (the API pages through them), once: the button stays
// disabled after it is sent.
function bulkReplay(endpointID, n, msg) {
    const b = h("button", { type: "button", class: "secondary", "data-action": "replay-endpoint", "data-endpoint": endpointID }, `Replay all ${n} of ${endpointID}, in order`);
    b.addEventListener("click", async () => {
        if (b.disabled)
            return;
        b.disabled = true;
        try {
            const r = await call("deadLetterReplayBatch", 202, { query: { endpoint_id: endpointID } });
            for (const row of document.querySelectorAll("#dead-letters tr[data-dead-letter]")) {
                if (row.dataset.endpoint !== endpointID || !r.event_ids.includes(row.dataset.deadLetter ?? ""))
                    continue;
                for (const btn of row.querySelectorAll("button"))
                    btn.disabled = true;
            }
            msg.replaceChildren(h("p", { class: "badge ok", id: "done" }, `${endpointID}: ${r.replayed} replaying`));
        }
        catch (err) {
            if (err instanceof Ended)
                return;
            b.disabled = false;
            msg.replaceChildren(errorBox(err));
        }
    });
    return b;
}
// dlButtons are a dead letter's replay and skip. A button is disabled
// while its request is in flight and stays so once it is sent, so a double
// click sends one; the API's answer to a second one anyway (409, it is not
// open) is taken as done.
function dlButtons(d, msg) {
    const note = h("input", { name: "note", placeholder: "skip note" });
    const replay = h("button", { type: "button", "data-action": "replay" }, "Replay");
    const skip = h("button", { type: "button", class: "secondary", "data-action": "skip" }, "Skip");
    const run = async (op, done) => {
        if (replay.disabled || skip.disabled)
            return;
        replay.disabled = skip.disabled = true;
        try {
            const body = { endpoint_id: d.endpoint_id };
            if (op === "deadLetterSkip" && note.value.trim())
                body.note = note.value.trim();
            await call(op, 202, { id: d.event_id, body });
            msg.replaceChildren(h("p", { class: "badge ok", id: "done" }, `${d.event_id}: ${done}`));
        }
        catch (err) {
            if (err instanceof Ended)
                return;
            if (err instanceof ApiError && err.status === 409) {
                msg.replaceChildren(h("p", { class: "badge", id: "done" }, `${d.event_id}: already replayed or skipped`));
                return;
            }
            replay.disabled = skip.disabled = false;
            msg.replaceChildren(errorBox(err));
        }
    };
    replay.addEventListener("click", () => void run("deadLetterReplay", "replaying"));
    skip.addEventListener("click", () => void run("deadLetterSkip", "skipped"));
    return [replay, note, skip];
}
void start();
export {};
