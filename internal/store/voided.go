package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// ErrReservedCorrelation is returned by CorrelationVoid for a correlation
// of hookflow's own (intake.ReservedCorrelationPrefix: an endpoint's
// operational events, its test events): their sequences are the system's
// to allocate, and a void there would take the number the next notice or
// test needs.
var ErrReservedCorrelation = errors.New("correlation is hookflow's own")

// Bounds of a void. A void stores a tombstone and raises the correlation's
// high-water mark, and the next operational or test sequence is allocated
// past that mark, so a void far ahead moves what the system allocates
// there: a void may reach at most MaxVoidAhead past the highest sequence
// the correlation holds (its high-water mark or cursor; a producer that
// lost more than that voids in steps as its events arrive), and never past
// MaxVoidSequence, far below 2^63-1, whatever the correlation holds.
const (
	MaxVoidAhead    = 1000
	MaxVoidSequence = int64(1) << 53
)

// Void is what voiding sequences of a correlation did: the sequences whose
// tombstones it stored, and those voided already (a repeat, which changes
// nothing), or, when any of the sequences asked has arrived, those (Arrived)
// and nothing stored.
type Void struct {
	Voided, Already, Arrived []int64
	// Beyond are the sequences asked past Ceiling (MaxVoidAhead,
	// MaxVoidSequence); when any is, nothing is stored.
	Beyond  []int64
	Ceiling int64
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
//
// It refuses, storing nothing: a correlation of hookflow's own
// (ErrReservedCorrelation); for a store limited to endpoints
// (OnlyEndpoints), a correlation with no lane at any of them (ErrNotFound:
// it is not there for it); and sequences past the correlation's ceiling
// (Void.Beyond, with Void.Ceiling).
func (s *Store) CorrelationVoid(ctx context.Context, correlationID string, sequences []int64, by, note string) (Void, error) {
	if strings.HasPrefix(correlationID, intake.ReservedCorrelationPrefix) {
		return Void{}, fmt.Errorf("void sequences of %s: %w", correlationID, ErrReservedCorrelation)
	}
	var v Void
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		v = Void{}
		q := s.q.WithTx(tx)
		if s.limited {
			at, err := q.CorrelationLaneAtAny(ctx, dbsqlc.CorrelationLaneAtAnyParams{TenantID: s.tenant, CorrelationID: correlationID, Endpoints: s.only})
			if err != nil {
				return err
			}
			if !orZero(at) {
				return ErrNotFound
			}
		}
		// The check takes (or makes) the correlation's row lock, which an
		// acceptance takes before storing its event and holds to its
		// commit (the same order as here: lock, then the events' unique
		// keys); a statement that waited for it still reads the events as
		// they were when it began (READ COMMITTED), without the event that
		// acceptance committed, and would void a sequence that arrived
		// while the unique (correlation, sequence) quietly drops its
		// tombstone. So the check runs again once the lock is held, and
		// that reading decides.
		for range 2 {
			if err := tx.QueryRow(ctx, dbsqlc.CorrelationVoidCheck, correlationID, sequences, s.tenant).Scan(&v.Arrived, &v.Already); err != nil {
				return err
			}
		}
		if len(v.Arrived) > 0 {
			return nil
		}
		// Read under the lock the check took, so no acceptance moves it.
		top, err := q.CorrelationTop(ctx, dbsqlc.CorrelationTopParams{TenantID: s.tenant, CorrelationID: correlationID})
		if err != nil {
			return err
		}
		v.Ceiling = voidCeiling(top)
		for _, seq := range slices.Compact(slices.Sorted(slices.Values(sequences))) {
			if seq > v.Ceiling && !slices.Contains(v.Already, seq) {
				v.Beyond = append(v.Beyond, seq)
			}
		}
		if len(v.Beyond) > 0 {
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
		var stored int64
		b.Queue(dbsqlc.CorrelationVoidInsert, correlationID, v.Voided, ids, string(data), s.tenant).QueryRow(func(row pgx.Row) error {
			return row.Scan(&stored)
		})
		b.Queue(dbsqlc.CorrelationAdvance, correlationID, s.tenant)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		// Under the lock no acceptance can hold one of these sequences
		// unseen by the check, so a tombstone the unique keys dropped is a
		// broken invariant: answering it voided would be a lie.
		if stored != int64(len(v.Voided)) {
			return fmt.Errorf("store tombstones: %d of %d stored", stored, len(v.Voided))
		}
		return nil
	})
	if err != nil {
		return Void{}, fmt.Errorf("void sequences: %w", err)
	}
	return v, nil
}

// voidCeiling is the highest sequence a void may reach in a correlation
// whose highest is top (which a producer may have posted near 2^63-1).
func voidCeiling(top int64) int64 {
	if top >= MaxVoidSequence-MaxVoidAhead {
		return MaxVoidSequence
	}
	return top + MaxVoidAhead
}
