package redis

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookflow/hookflow/internal/redact"
	"github.com/hookflow/hookflow/internal/transport"
)

// readPage is how many entries one XRANGE or SCAN step asks for.
const readPage = 500

// Read calls each with every message in d's lanes, lane by lane (sorted by
// key), each lane in its stream's order. It finds the lanes by their keys
// (SCAN), not through the index, which is trimmed. Entries another writer
// put in a lane (no hookflow-endpoint-id) come as they are, with what
// could be read of them, so that the caller can tell them foreign.
func (t *Transport) Read(ctx context.Context, d transport.Destination, each func(transport.Stored) error) error {
	scrub := redact.NewValues(slices.Collect(maps.Values(d.Credentials)))
	c, release, err := t.client(d)
	if err != nil {
		return errors.New(scrub.Replace(err.Error()))
	}
	defer release()
	if err := read(ctx, c.rdb, c.dest, each); err != nil {
		return errors.New(scrub.Replace(err.Error()))
	}
	return nil
}

func read(ctx context.Context, rdb *goredis.Client, p *dest, each func(transport.Stored) error) error {
	prefix := p.index() + ":"
	seen := map[string]bool{}
	var cursor uint64
	for {
		keys, next, err := rdb.ScanType(ctx, cursor, prefix+"*", readPage, "stream").Result()
		if err != nil {
			return errors.New("scan lanes: " + err.Error())
		}
		for _, k := range keys {
			seen[k] = true
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	for _, key := range slices.Sorted(maps.Keys(seen)) {
		start := "-"
		for {
			entries, err := rdb.XRangeN(ctx, key, start, "+", readPage).Result()
			if err != nil {
				return errors.New("read lane " + key + ": " + err.Error())
			}
			for _, e := range entries {
				s, err := stored(e.Values)
				if s.Lane == "" {
					s.Lane = strings.TrimPrefix(key, prefix)
				}
				if err != nil && s.EndpointID != "" {
					return errors.New("read " + key + " entry " + e.ID + ": " + err.Error())
				}
				if err := each(s); err != nil {
					return err
				}
			}
			if len(entries) < readPage {
				break
			}
			start = "(" + entries[len(entries)-1].ID
		}
	}
	return nil
}

// stored reads a lane entry's fields back.
func stored(values map[string]any) (transport.Stored, error) {
	get := func(name string) string {
		v, _ := values[name].(string)
		return v
	}
	return transport.StoredFrom(get, []byte(get(FieldEnvelope)))
}
