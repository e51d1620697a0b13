// Package redis is the Redis Streams transport: each lane (an endpoint's
// correlation) is a stream of its own, {<stream>}:<correlation_id>, whose
// entry IDs are the lane's sequences (<sequence>-0), and each write is
// noted in the endpoint's index stream {<stream>}, which consumers read
// (XREAD, XREADGROUP) to learn of new messages in arrival order. One Lua
// script writes both atomically, and the lane rule (transport.Decide) is
// the server's own: XADD refuses an ID at or below the stream's last one,
// which is a duplicate or an event written after its successor. So every
// message is stored exactly once and in order per lane, whatever attempts
// are lost or race, in one round trip when nothing is wrong.
//
// What the server must do for that promise: keep each lane's key (XDEL and
// XTRIM keep a stream's last ID; DEL, EXPIRE, FLUSHDB and eviction lose it),
// and persist with AOF (appendonly yes): Redis answers after the AOF
// write, so a killed process loses nothing acknowledged, and appendfsync
// always covers a power loss too. Check refuses a server without AOF
// unless config.durability is best_effort. The script's two writes are
// logged as one MULTI/EXEC block, which Redis (7.0.15, and every release
// before a late-2025 fix) replays at start as the default user,
// re-checking that user's ACL: on a server whose default user lacks
// permissions (as "user default off" alone leaves it), every such write
// is silently dropped at restart. The default user may be off; it must
// keep its permissions ("user default off ~* &* +@all" still refuses
// every login as it). A failover to a replica that
// missed acknowledged writes (replication is asynchronous) loses them; the
// lanes then go on past the hole, and the conformance check reports it.
// Only a standalone server is supported (no Cluster, no Sentinel): a
// MOVED answer is permanent.
//
// The user makes the index stream before the endpoint (with the consumer
// group its consumers read it by: XGROUP CREATE {<stream>} <group> 0
// MKSTREAM). Check refuses a prefix without it, and Send waits (retry,
// not an outage) while it is missing, since a missing index means the
// wrong server or database, or one that lost its data.
//
// The ACL the credentials need: ~{<stream>}* +evalsha +eval +script|load
// +xadd +xrange +xrevrange +xinfo|stream +type +scan +ping +info (and
// +select for a db other than 0).
//
// Config (a JSON object): addr ("host:port"), stream (the key prefix,
// 1-100 of A-Z a-z 0-9 _ : . -), tls (default true; false only for a
// target the egress policy allows, HOOKFLOW_PRIVATE_TARGET_ALLOWLIST),
// db (default 0), index_maxlen (default 1,000,000) and durability ("aof",
// the default, or "best_effort"). Credentials: password (required) and
// username (for an ACL user; the default user without).
package redis

import (
	"cmp"
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/printable"
	"github.com/hookflow/hookflow/internal/redact"
	"github.com/hookflow/hookflow/internal/transport"
)

// Type is the endpoint type this transport serves.
const Type = "redis"

// FieldEnvelope is the entry field that holds the envelope, as signed;
// the other fields are the transport.Header* names.
const FieldEnvelope = "envelope"

// maxDetail bounds what an answer's Detail keeps of the server's words.
const maxDetail = 512

//go:embed append.lua
var appendSource string

// Transport writes to Redis Streams. It is safe for concurrent use.
type Transport struct {
	targets egress.Policy
	script  *goredis.Script
	pool    *clients
}

var (
	_ transport.Transport  = (*Transport)(nil)
	_ transport.Configurer = (*Transport)(nil)
	_ transport.Checker    = (*Transport)(nil)
	_ transport.Reader     = (*Transport)(nil)
)

// New returns the redis transport under the deployment's targets policy.
func New(targets egress.Policy) *Transport {
	return &Transport{targets: targets, script: goredis.NewScript(appendSource), pool: newClients(maxClients, idleClose)}
}

// Close closes every connection the transport holds; the worker calls it
// once it has stopped.
func (t *Transport) Close() error { return t.pool.close() }

// Validate checks d's config and credentials as Address does.
func (t *Transport) Validate(_ context.Context, d transport.Destination) error {
	_, err := parse(t.targets, d)
	return err
}

// Address checks d's config and credentials as they would be stored, the
// egress policy on the address included, without reaching the server, and
// returns the canonical address: redis:// (rediss:// with TLS),
// host:port, the database as the path and the stream prefix as the query.
func (t *Transport) Address(_ context.Context, d transport.Destination) (string, error) {
	p, err := parse(t.targets, d)
	if err != nil {
		return "", err
	}
	return p.url(), nil
}

// newClient makes the go-redis client of p under the policy: its dials go
// through the egress dialer (so that a name resolving to a forbidden
// address later is refused), and it never retries by itself, since a
// retry is Temporal's, with the attempt recorded.
func (t *Transport) newClient(p *dest, privateTargets bool) *goredis.Client {
	o := &goredis.Options{
		Addr:                  net.JoinHostPort(p.host, p.port),
		Username:              p.username,
		Password:              p.password,
		DB:                    p.DB,
		Dialer:                t.targets.ForTenant(privateTargets).DialContext,
		DialTimeout:           transport.BrokerTimeout,
		DialerRetries:         1,
		ConnMaxIdleTime:       idleClose,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		// Maintenance notifications are Redis Enterprise's and Cloud's;
		// asking a server for them costs a command on every connection.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if p.tls {
		o.TLSConfig = &tls.Config{ServerName: p.host, MinVersion: tls.VersionTLS12}
	}
	return goredis.NewClient(o)
}

// client returns the pooled client of d, and its release.
func (t *Transport) client(d transport.Destination) (*client, func(), error) {
	key := clientKey(d.EndpointID, d.Config, d.Credentials, d.PrivateTargets)
	return t.pool.get(key, func() (*client, error) {
		p, err := parse(t.targets, d)
		if err != nil {
			return nil, err
		}
		return &client{rdb: t.newClient(p, d.PrivateTargets), dest: p}, nil
	})
}

// Send writes m to its lane's stream and notes it in the index, in one
// script run: written → delivered; the lane holding m already (an earlier
// attempt's answer was lost) → delivered, nothing written; the lane
// holding a later sequence or another endpoint's messages → permanent;
// the index stream missing → retry; the server unreachable, timing out or
// loading → retry, an outage; credentials or permissions refused →
// permanent.
func (t *Transport) Send(ctx context.Context, d transport.Destination, m transport.Message) (transport.Result, error) {
	scrub := redact.NewValues(slices.Collect(maps.Values(d.Credentials)))
	c, release, err := t.client(d)
	if errors.Is(err, errClosed) {
		return stopping, nil
	}
	if err != nil {
		return transport.Result{}, errors.New(scrub.Replace(err.Error()))
	}
	defer release()
	h, err := transport.Headers(d, m)
	if err != nil {
		return transport.Result{}, err
	}
	p := c.dest
	id := strconv.FormatInt(m.Sequence, 10) + "-0"
	args := []any{id, d.EndpointID, m.EventID, m.CorrelationID, m.Sequence, p.IndexMaxLen}
	for _, name := range slices.Sorted(maps.Keys(h)) {
		if name != transport.HeaderContentType {
			args = append(args, name, h[name])
		}
	}
	args = append(args, FieldEnvelope, m.Body)
	reply, err := t.script.Run(ctx, c.rdb, []string{p.lane(m.CorrelationID), p.index()}, args...).Slice()
	if err != nil {
		return failed(err, scrub), nil
	}
	return answer(reply, d.EndpointID, m, p), nil
}

// answer reads the append script's reply.
func answer(reply []any, endpointID string, m transport.Message, p *dest) transport.Result {
	// A reply the script does not make (a proxy's, another script's
	// under the same digest) says nothing of what was written: the next
	// attempt looks again.
	quoted := fmt.Sprint(reply)
	odd := transport.Result{Outcome: transport.Retry, Detail: "redis: unexpected append reply " + printable.String(quoted[:min(len(quoted), maxDetail)]), Summary: "redis: unexpected append reply"}
	if len(reply) == 0 {
		return odd
	}
	switch code, _ := reply[0].(int64); code {
	case 1:
		return transport.Result{Outcome: transport.Delivered}
	case 2:
		msg := fmt.Sprintf("redis: the stream %s does not exist (create it with its consumer group: XGROUP CREATE %s <group> 0 MKSTREAM)", p.index(), p.index())
		return transport.Result{Outcome: transport.Retry, Detail: msg, Summary: msg}
	}
	if len(reply) != 4 {
		return odd
	}
	at, _ := reply[1].(string)
	eventID, _ := reply[2].(string)
	owner, _ := reply[3].(string)
	seq, err := strconv.ParseInt(strings.SplitN(at, "-", 2)[0], 10, 64)
	if err != nil {
		return odd
	}
	if eventID == "" && owner == "" {
		// No entry at m's ID, yet the lane's last ID is at or past it.
		// Only m's own write sets it to exactly m's ID (a consumer then
		// deleted the entry): written. Past it, a later event was
		// written.
		if at == strconv.FormatInt(m.Sequence, 10)+"-0" {
			return transport.Result{Outcome: transport.Delivered}
		}
		owner = endpointID
	}
	tail := &transport.Tail{Sequence: seq, EventID: eventID, EndpointID: cmp.Or(owner, "(none)")}
	switch decision, why := transport.Decide(tail, m, endpointID); decision {
	case transport.Written:
		return transport.Result{Outcome: transport.Delivered}
	case transport.Refuse:
		msg := "redis: " + why
		return transport.Result{Outcome: transport.Permanent, Detail: msg, Summary: msg}
	}
	// The server refused the write, yet the tail it names would take
	// it: nothing is known to be wrong, so the next attempt looks again.
	msg := fmt.Sprintf("redis: the lane refused sequence %d after %s", m.Sequence, at)
	return transport.Result{Outcome: transport.Retry, Detail: msg, Summary: msg}
}

// stopping is the answer to a Send that meets the transport closed: the
// worker is stopping, and another attempt will go through another one.
// Nothing is known of the destination, so it is no outage.
var stopping = transport.Result{Outcome: transport.Retry, Detail: "redis: the worker is stopping", Summary: "redis: the worker is stopping"}

// failed maps a command's error to its outcome. Detail keeps the server's
// words, Summary only their kind; neither holds a credential.
func failed(err error, scrub *redact.Values) transport.Result {
	detail := func(summary string) string {
		return printable.String(scrub.Cut(summary+": "+err.Error(), maxDetail))
	}
	var rerr goredis.Error
	switch {
	case errors.Is(err, goredis.ErrClosed):
		return stopping
	case goredis.IsAuthError(err):
		s := "redis refused the credentials"
		return transport.Result{Outcome: transport.Permanent, Summary: s, Detail: detail(s)}
	case goredis.IsPermissionError(err):
		s := "redis refused a command to the credentials' user (see the ACL it needs)"
		return transport.Result{Outcome: transport.Permanent, Summary: s, Detail: detail(s)}
	case isMoved(err):
		s := "redis answered as a Cluster node; only a standalone server is supported"
		return transport.Result{Outcome: transport.Permanent, Summary: s, Detail: detail(s)}
	case goredis.IsLoadingError(err), goredis.IsReadOnlyError(err), goredis.IsMasterDownError(err),
		goredis.IsTryAgainError(err), goredis.IsClusterDownError(err), goredis.IsMaxClientsError(err),
		goredis.IsOOMError(err), goredis.HasErrorPrefix(err, "BUSY"):
		s := "redis is unavailable"
		return transport.Result{Outcome: transport.Retry, Outage: true, Summary: s, Detail: detail(s)}
	case goredis.HasErrorPrefix(err, "WRONGTYPE"):
		s := "redis: a key of the destination is not a stream"
		return transport.Result{Outcome: transport.Permanent, Summary: s, Detail: detail(s)}
	case errors.As(err, &rerr):
		// Another refusal by the server: the user may fix it (a
		// setting, a script cache) while the retries run.
		s := "redis refused the write"
		return transport.Result{Outcome: transport.Retry, Summary: s, Detail: detail(s)}
	}
	// Not the server's answer: a dial, a timeout, a broken connection.
	s := "redis is unreachable"
	return transport.Result{Outcome: transport.Retry, Outage: true, Summary: s, Detail: detail(s)}
}

func isMoved(err error) bool {
	_, moved := goredis.IsMovedError(err)
	_, ask := goredis.IsAskError(err)
	return moved || ask
}
