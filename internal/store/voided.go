package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// Void is what voiding sequences of a correlation did: the sequences whose
// tombstones it stored, and those voided already (a repeat, which changes
// nothing), or, when any of the sequences asked has arrived, those (Arrived)
// and nothing stored.
type Void struct {
	Voided, Already, Arrived []int64
}

// voidRecord is a tombstone's data: who voided the sequence, when and why.
type voidRecord struct {
	VoidedBy string    `json:"voided_by"`
	VoidedAt time.Time `json:"voided_at"`
	Note     string    `json:"note,omitempty"`
}

// CorrelationVoid voids sequences of correlationID that the producer lost:
// in one transaction, under the correlation's lock, it refuses them all
// (Void.Arrived, nothing stored) if any has arrived; else it stores a
// tombstone (contract.VoidedType, id contract.VoidedID) for each not voided
// already, recording by, now and note, and moves the cursor past those at
// it. The caller then tells the sequencer (a resync, which loads them).
func (s *Store) CorrelationVoid(ctx context.Context, correlationID string, sequences []int64, by, note string) (Void, error) {
	var v Void
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		v = Void{}
		if err := tx.QueryRow(ctx, dbsqlc.CorrelationVoidCheck, correlationID, sequences, s.tenant).Scan(&v.Arrived, &v.Already); err != nil {
			return err
		}
		if len(v.Arrived) > 0 {
			return nil
		}
		var ids []string
		for _, seq := range slices.Compact(slices.Sorted(slices.Values(sequences))) {
			if !slices.Contains(v.Already, seq) {
				v.Voided = append(v.Voided, seq)
				ids = append(ids, contract.VoidedID(correlationID, seq))
			}
		}
		if len(v.Voided) == 0 {
			return nil
		}
		data, err := json.Marshal(voidRecord{VoidedBy: by, VoidedAt: time.Now().UTC(), Note: note})
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(dbsqlc.CorrelationVoidInsert, correlationID, v.Voided, ids, string(data), s.tenant)
		b.Queue(dbsqlc.CorrelationAdvance, correlationID, s.tenant)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return Void{}, fmt.Errorf("void sequences: %w", err)
	}
	return v, nil
}
