package api

import (
	"crypto/rand"
	"encoding/base32"

	"github.com/hookflow/hookflow/kit/intake"
)

// validKey applies intake's identifier rule and answers with a problem.
func validKey(field, v string) *Problem {
	if fe := intake.ValidKey(field, v); fe != nil {
		return fieldProblem(fe.Field, fe.Detail)
	}
	return nil
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func newID(prefix string) string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return prefix + idEncoding.EncodeToString(b)
}
