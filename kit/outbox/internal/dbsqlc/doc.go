// Package dbsqlc is the outbox's queries (kit/outbox/queries) as sqlc
// generates them (make generate-sql, sqlc.yaml). The files beside this one
// are sqlc's output, never edited by hand.
package dbsqlc
