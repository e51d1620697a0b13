package store

// StuckHeadsClaimQuery is the stuck-heads claim's SQL, for EXPLAIN in tests.
func StuckHeadsClaimQuery(s *Store) string { return s.q.LanesStuckHeadsClaim }

// EndpointHealthQuery is the health query's SQL, for EXPLAIN in tests.
func EndpointHealthQuery(s *Store) string { return s.q.EndpointHealth }
