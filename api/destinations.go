package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/transport"
)

// A broker destination (a transport that is a transport.Configurer) is
// set by its type's config and credentials, and has no URL of its own: the
// API stores the canonical address the transport makes of config as the
// endpoint's url, which is what the lists, the redaction and the audit of
// address changes already work with. A webhook has neither config nor
// credentials.

// destinationCheck is what a create or an address change sends of the
// destination: its type, URL (a webhook's), and config and credentials (a
// broker's).
type destinationCheck struct {
	typ         string
	url         string
	config      map[string]any
	credentials map[string]string
	// credentialsSet: the request sent credentials (a PATCH may change
	// config alone).
	credentialsSet bool
	// webhookOnly names the settings of a webhook's HTTP request the
	// request set (headers, url_path_public): a broker has none.
	webhookOnly []string
}

// checkDestination checks what d names for tenant t through the type's
// transport and returns the URL to store: a webhook's as sent, a broker's
// the canonical address of its config. A broker is reached with its
// credentials (transport.Checker, bounded by transport.BrokerTimeout), so
// that a destination that cannot take a delivery is refused now rather
// than dead-lettered later.
func (s *Server) checkDestination(ctx context.Context, t store.Tenant, d destinationCheck) (string, json.RawMessage, *Problem) {
	tr, err := s.deps.Transports.Lookup(d.typ)
	if err != nil {
		// The document let the type through, and this API serves none.
		p := fieldProblem("type", err.Error())
		p.Status = http.StatusUnprocessableEntity
		return "", nil, p
	}
	cf, broker := tr.(transport.Configurer)
	if !broker {
		if d.config != nil || d.credentialsSet {
			field := "config"
			if d.config == nil {
				field = "credentials"
			}
			return "", nil, unprocessable(field, fmt.Sprintf("a %s endpoint has no %s: its url says where it is", d.typ, field))
		}
		if d.url == "" {
			return "", nil, fieldProblem("url", "a webhook endpoint needs a url")
		}
		return d.url, nil, s.checkURL(ctx, t, d.typ, d.url)
	}
	if d.url != "" {
		return "", nil, unprocessable("url", fmt.Sprintf("a %s endpoint takes its address in config, not url", d.typ))
	}
	if len(d.webhookOnly) > 0 {
		return "", nil, unprocessable(d.webhookOnly[0], fmt.Sprintf("a %s endpoint has no %s: it is a setting of a webhook's HTTP request", d.typ, d.webhookOnly[0]))
	}
	if d.config == nil {
		return "", nil, fieldProblem("config", fmt.Sprintf("a %s endpoint needs a config", d.typ))
	}
	raw, err := json.Marshal(d.config)
	if err != nil {
		return "", nil, unprocessable("config", "config is not a JSON object")
	}
	granted := t.Limits.PrivateTargets(t.ID)
	dest := transport.Destination{Config: raw, Credentials: d.credentials, PrivateTargets: granted}
	addr, err := cf.Address(ctx, dest)
	if err != nil {
		p := destinationProblem(err, "config")
		dest.PrivateTargets = true
		if !granted {
			if _, err := cf.Address(ctx, dest); err == nil {
				p.Detail = fmt.Sprintf("config refused: tenant %s may not use the private-target allowlist (its allow_private_targets)", t.ID)
				p.Extensions = map[string]any{"tenant_limit": "allow_private_targets", "tenant_id": t.ID}
			}
		}
		return "", nil, p
	}
	dest.URL = addr
	if ck, ok := tr.(transport.Checker); ok {
		cctx, cancel := context.WithTimeout(ctx, transport.BrokerTimeout)
		defer cancel()
		if err := ck.Check(cctx, dest); err != nil {
			return "", nil, destinationProblem(err, "config")
		}
	}
	return addr, raw, nil
}

// webhookOnly names the webhook-only settings a request set.
func webhookOnly(headers bool, urlPathPublic bool) []string {
	var out []string
	if headers {
		out = append(out, "headers")
	}
	if urlPathPublic {
		out = append(out, "url_path_public")
	}
	return out
}

// destinationProblem is the 422 of a destination's transport refusing it,
// naming the field it names (transport.FieldError), or field.
func destinationProblem(err error, field string) *Problem {
	if fe, ok := errors.AsType[*transport.FieldError](err); ok {
		return unprocessable(fe.Field, fe.Field+" refused: "+fe.Reason)
	}
	return unprocessable(field, field+" refused: "+err.Error())
}

func unprocessable(field, detail string) *Problem {
	p := fieldProblem(field, detail)
	p.Status = http.StatusUnprocessableEntity
	return p
}

// credentialNames is what the API shows of credentials: each name, its
// value "********" (the values are secrets, as the signing secret is after
// its creation).
func credentialNames(c map[string]string) map[string]string {
	if len(c) == 0 {
		return nil
	}
	out := make(map[string]string, len(c))
	for k := range c {
		out[k] = RedactedHeaderValue
	}
	return out
}
