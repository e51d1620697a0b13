package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookflow/hookflow/internal/printable"
	"github.com/hookflow/hookflow/internal/redact"
	"github.com/hookflow/hookflow/internal/transport"
)

// Check proves d works before it is stored: the server answers PING with
// the credentials, runs standalone, persists with AOF and evicts no key
// without a TTL (unless config.durability is best_effort), holds the index
// stream, and lets the
// user load the append script (so EVAL is allowed). It makes a client of
// its own, closed on return: the API that calls it sends nothing.
func (t *Transport) Check(ctx context.Context, d transport.Destination) error {
	p, err := parse(t.targets, d)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, transport.BrokerTimeout)
		defer cancel()
	}
	scrub := redact.NewValues(slices.Collect(maps.Values(d.Credentials)))
	rdb := t.newClient(p, d.PrivateTargets)
	defer rdb.Close()

	if err := rdb.Ping(ctx).Err(); err != nil {
		return checkError(err, scrub, "config.addr", "reach the server")
	}
	server, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return checkError(err, scrub, "config.addr", "read INFO server")
	}
	if mode := infoField(server, "redis_mode"); mode != "standalone" {
		return &transport.FieldError{Field: "config.addr", Reason: fmt.Sprintf("the server runs as redis_mode %q: only a standalone server is supported", mode)}
	}
	if p.Durability != DurabilityBestEffort {
		persistence, err := rdb.Info(ctx, "persistence").Result()
		if err != nil {
			return checkError(err, scrub, "config.addr", "read INFO persistence")
		}
		if infoField(persistence, "aof_enabled") != "1" {
			return &transport.FieldError{Field: "config.durability", Reason: "the server does not persist with AOF (appendonly yes), so a crash would lose acknowledged messages: turn it on, or set durability to best_effort"}
		}
		// An evicted lane loses its last ID, and with it what refuses a
		// repeat; volatile-* policies evict only keys with a TTL, which
		// lanes have none of.
		memory, err := rdb.Info(ctx, "memory").Result()
		if err != nil {
			return checkError(err, scrub, "config.addr", "read INFO memory")
		}
		if policy := infoField(memory, "maxmemory_policy"); strings.HasPrefix(policy, "allkeys-") {
			return &transport.FieldError{Field: "config.durability", Reason: fmt.Sprintf("the server evicts any key when full (maxmemory-policy %s), a lane's included: use noeviction or a volatile- policy, or set durability to best_effort", policy)}
		}
	}
	switch typ, err := rdb.Type(ctx, p.index()).Result(); {
	case err != nil:
		return checkError(err, scrub, "config.stream", "read the stream's type")
	case typ == "none":
		return &transport.FieldError{Field: "config.stream", Reason: fmt.Sprintf("the stream %s does not exist: create it with its consumer group (XGROUP CREATE %s <group> 0 MKSTREAM)", p.index(), p.index())}
	case typ != "stream":
		return &transport.FieldError{Field: "config.stream", Reason: fmt.Sprintf("%s is a %s, not a stream", p.index(), typ)}
	}
	if err := t.script.Load(ctx, rdb).Err(); err != nil {
		return checkError(err, scrub, "credentials", "load the append script")
	}
	return nil
}

// checkError says what a check's step met, as a refusal of the field it
// is about (of the credentials when the server refused them).
func checkError(err error, scrub *redact.Values, field, step string) error {
	reason := step + ": " + err.Error()
	switch {
	case goredis.IsAuthError(err):
		field, reason = "credentials", "the server refused the credentials"
	case goredis.IsPermissionError(err):
		field, reason = "credentials", "the user may not "+step+" (see the ACL a redis destination needs): "+err.Error()
	case isMoved(err):
		field, reason = "config.addr", "the server is a Cluster node: only a standalone server is supported"
	case errors.Is(err, context.DeadlineExceeded):
		reason = step + ": no answer in time"
	}
	return &transport.FieldError{Field: field, Reason: printable.String(scrub.Cut(reason, maxDetail))}
}

// infoField reads one field of an INFO answer.
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
