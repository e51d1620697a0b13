package store

import "github.com/hookflow/hookflow/schema/dbsqlc"

// StuckHeadsClaimQuery is the stuck-heads claim's SQL, for EXPLAIN in tests.
func StuckHeadsClaimQuery(*Store) string { return dbsqlc.LanesStuckHeadsClaim }

// EndpointHealthQuery is the health query's SQL, for EXPLAIN in tests.
func EndpointHealthQuery(*Store) string { return dbsqlc.EndpointHealth }
