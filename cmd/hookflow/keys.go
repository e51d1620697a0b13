package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/printable"
	"github.com/hookflow/hookflow/kit/client"
)

const keysUsage = `usage: hookflow keys <create|list|revoke> [flags]

  create --name NAME --scope SCOPE [--scope SCOPE …]   make an API key; it is printed once
  list   [--json]                                      every key, revoked ones included
  revoke <key id>                                      refuse the key from the next request on

With --tenant ID (HOOKFLOW_TENANT): create issues a key confined to that
tenant (scopes events:write, events:test, events:read, endpoints:write,
dead-letters:write; needs tenants:write), list shows that tenant's keys
only, and revoke refuses a key that is not that tenant's.

Scopes: events:write, events:test (a test event to one endpoint; events:write
includes it), events:read, endpoints:write, dead-letters:write, tenants:write,
admin. Talks to the API at HOOKFLOW_API_URL with
HOOKFLOW_API_TOKEN, which must be an admin key or the bootstrap token
(tenants:write is enough to create a tenant's key).`

// scopeFlags collects repeated --scope flags.
type scopeFlags []string

func (s *scopeFlags) String() string     { return strings.Join(*s, ",") }
func (s *scopeFlags) Set(v string) error { *s = append(*s, v); return nil }

// runKeys creates, lists and revokes API keys through the API.
func runKeys(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(env.stdout, keysUsage)
		if len(args) == 0 {
			return &config.UsageError{Msg: "keys needs a subcommand: create, list or revoke"}
		}
		return config.ErrHelp
	}
	sub := args[0]
	var (
		name   string
		scopes scopeFlags
		asJSON bool
	)
	flags := func(fs *flag.FlagSet) {
		fs.StringVar(&name, "name", "", "create: who or what uses the key (the by of its replays and skips)")
		fs.Var(&scopes, "scope", "create: a scope the key gets (repeat for more)")
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	}
	switch sub {
	case "create", "list", "revoke":
	default:
		return &config.UsageError{Msg: fmt.Sprintf("unknown keys subcommand %q (create, list, revoke)", sub)}
	}
	cfg, rest, err := config.LoadWithFlags("keys "+sub, keysUsage, tenantClientSettings, args[1:], env.getenv, apiClientDefaults(), env.stdout, flags)
	if err != nil {
		return err
	}
	cl, err := newAPIClient(cfg)
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		if name == "" || len(scopes) == 0 || len(rest) > 0 {
			return &config.UsageError{Msg: "keys create needs --name and at least one --scope, and nothing else"}
		}
		req := client.APIKeyCreate{Name: name, TenantID: cl.tenant}
		for _, s := range scopes {
			req.Scopes = append(req.Scopes, client.Scope(s))
		}
		r, err := cl.APIKeyCreateWithResponse(ctx, req)
		if err != nil {
			return cl.fail(err)
		}
		k := r.JSON201
		if asJSON {
			return json.NewEncoder(env.stdout).Encode(k)
		}
		fmt.Fprintf(env.stdout, "id      %s\nname    %s\ntenant  %s\nscopes  %s\nkey     %s\n\nThe key is shown this once; hookflow keeps only its hash.\n",
			k.ID, k.Name, keyTenant(k.TenantID), joinScopes(k.Scopes), k.Key)
		return nil
	case "list":
		if len(rest) > 0 {
			return &config.UsageError{Msg: "keys list takes no arguments"}
		}
		r, err := cl.APIKeyListWithResponse(ctx)
		if err != nil {
			return cl.fail(err)
		}
		keys := r.JSON200.Items
		if cl.tenant != "" {
			keys = slices.DeleteFunc(keys, func(k client.APIKey) bool { return k.TenantID != cl.tenant })
		}
		if asJSON {
			return json.NewEncoder(env.stdout).Encode(keys)
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tTENANT\tSCOPES\tCREATED\tREVOKED")
		for _, k := range keys {
			revoked := "-"
			if !k.RevokedAt.IsZero() {
				revoked = k.RevokedAt.Local().Format(time.RFC3339)
			}
			// Keys named before names were held to printable characters
			// may still carry control characters.
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, printable.String(k.Name), keyTenant(k.TenantID), joinScopes(k.Scopes),
				k.CreatedAt.Local().Format(time.RFC3339), revoked)
		}
		return tw.Flush()
	default: // revoke
		if len(rest) != 1 {
			return &config.UsageError{Msg: "keys revoke takes exactly one key id"}
		}
		if cl.tenant != "" {
			if err := keyOfTenant(ctx, cl, rest[0]); err != nil {
				return err
			}
		}
		r, err := cl.APIKeyRevokeWithResponse(ctx, rest[0])
		if err != nil {
			return cl.fail(err)
		}
		k := r.JSON200
		fmt.Fprintf(env.stdout, "revoked %s (%s)\n", k.ID, printable.String(k.Name))
		return nil
	}
}

// keyTenant names a key's tenant as the listing shows it: "-" for an
// operator key.
func keyTenant(tenant string) string {
	if tenant == "" {
		return "-"
	}
	return tenant
}

// keyOfTenant refuses to revoke key id unless it is cl.tenant's: with
// HOOKFLOW_TENANT set, an operator revoking by id means one of that
// tenant's keys, and a slip of the id must not revoke another's.
func keyOfTenant(ctx context.Context, cl apiClient, id string) error {
	r, err := cl.APIKeyListWithResponse(ctx)
	if err != nil {
		return cl.fail(err)
	}
	for _, k := range r.JSON200.Items {
		if k.ID == id && k.TenantID != cl.tenant {
			return fmt.Errorf("key %s is %s, not tenant %s's: not revoked", id, keyOwner(k.TenantID), cl.tenant)
		}
	}
	return nil
}

// keyOwner says whose a key is, in a sentence.
func keyOwner(tenant string) string {
	if tenant == "" {
		return "an operator key"
	}
	return "tenant " + tenant + "'s"
}

func joinScopes(scopes []client.Scope) string {
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, " ")
}
