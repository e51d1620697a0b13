// Package dbsqlc is the reference receiver's queries as sqlc
// generates them (make generate-sql, sqlc.yaml). The files beside this one
// are sqlc's output, never edited by hand.
package dbsqlc
