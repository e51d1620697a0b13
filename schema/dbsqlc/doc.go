// Package dbsqlc is hookflow's queries (schema/queries) as sqlc generates
// them (make generate-sql, sqlc.yaml): the store runs them, and the
// migration runner's ledger uses their statements. The files beside this
// one are sqlc's output, never edited by hand.
package dbsqlc
