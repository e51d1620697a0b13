// Package destcheck checks what a broker destination holds against the
// ledger: per lane (an endpoint's correlation), what hookflow delivered and
// the broker lacks, what it holds twice, out of order, with a broken chain
// of previous_sequence, a bad signature, or from another endpoint. It is
// the consumer's view of the exactly-once, in-order promise, read from the
// broker itself (transport.Reader): `hookflow conformance --destination`,
// the chaos run and the end-to-end tests judge a destination with it.
package destcheck

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/transport"
	standard "github.com/hookflow/hookflow/kit/webhook"
)

// Delivery is one of the endpoint's deliveries as the ledger has it.
type Delivery struct {
	EventID       string
	CorrelationID string
	Sequence      int64
	// Delivered: the ledger ended it delivered; otherwise skipped (an
	// operator skipped its dead letter, or voided it) or still open.
	Delivered bool
	Skipped   bool
}

// FromLedger is the endpoint's deliveries as Check takes them.
func FromLedger(ds []store.LaneDelivery) []Delivery {
	out := make([]Delivery, len(ds))
	for i, d := range ds {
		out[i] = Delivery{EventID: d.EventID, CorrelationID: d.CorrelationID, Sequence: d.Sequence,
			Delivered: d.State == contract.StateDelivered, Skipped: d.State == contract.StateSkipped}
	}
	return out
}

// Lane is what one lane of the destination holds against the ledger.
type Lane struct {
	Lane string
	// Delivered is how many the ledger delivered to it, Stored how many
	// messages the broker holds in it (repeats included).
	Delivered, Stored int
	// Missing: delivered in the ledger, absent from the broker.
	Missing []int64
	// Repeated: messages held more than once (by webhook-id).
	Repeated []int64
	// OutOfOrder: first copies whose sequence is not above the one
	// before.
	OutOfOrder []int64
	// ChainBreaks: messages whose previous_sequence is neither the
	// sequence held before them nor listed as skipped since.
	ChainBreaks []int64
	// WrittenSkipped: held by the broker, ended skipped in the ledger (an
	// acknowledgement lost before its dead letter was skipped); the
	// message after it lists it in skipped_sequences, so a consumer
	// applies both.
	WrittenSkipped []int64
	// BadSignature: messages whose signature does not verify with the
	// endpoint's secrets.
	BadSignature []int64
}

// Report is the check of one destination.
type Report struct {
	EndpointID string
	Lanes      []Lane
	// Foreign counts messages another endpoint wrote under this
	// destination's names.
	Foreign int
	// RepeatsAllowed: the destination promises at least once (a consumer
	// deduplicates by webhook-id), so a repeat is reported, not failed.
	RepeatsAllowed bool
}

// Totals sums the lanes.
func (r Report) Totals() Lane {
	var t Lane
	for _, l := range r.Lanes {
		t.Delivered += l.Delivered
		t.Stored += l.Stored
		t.Missing = append(t.Missing, l.Missing...)
		t.Repeated = append(t.Repeated, l.Repeated...)
		t.OutOfOrder = append(t.OutOfOrder, l.OutOfOrder...)
		t.ChainBreaks = append(t.ChainBreaks, l.ChainBreaks...)
		t.WrittenSkipped = append(t.WrittenSkipped, l.WrittenSkipped...)
		t.BadSignature = append(t.BadSignature, l.BadSignature...)
	}
	return t
}

// OK reports whether the destination keeps its promise: nothing missing,
// out of order, badly chained, badly signed or foreign, and no repeat
// unless repeats are allowed.
func (r Report) OK() bool {
	t := r.Totals()
	return len(t.Missing) == 0 && len(t.OutOfOrder) == 0 && len(t.ChainBreaks) == 0 && len(t.BadSignature) == 0 && r.Foreign == 0 &&
		(r.RepeatsAllowed || len(t.Repeated) == 0)
}

// Check reads every message d holds through rd and judges it against the
// endpoint's deliveries in the ledger. secrets are every secret that
// signed (the current one and those a rotation replaced). A signature is
// checked with no timestamp tolerance: a stored message is old by nature.
func Check(ctx context.Context, rd transport.Reader, d transport.Destination, secrets []string, ledger []Delivery, repeatsAllowed bool) (Report, error) {
	r := Report{EndpointID: d.EndpointID, RepeatsAllowed: repeatsAllowed}
	byLane := map[string][]transport.Stored{}
	err := rd.Read(ctx, d, func(s transport.Stored) error {
		if s.EndpointID != d.EndpointID {
			r.Foreign++
			return nil
		}
		byLane[s.Lane] = append(byLane[s.Lane], s)
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("read destination: %w", err)
	}
	ledgerByLane := map[string][]Delivery{}
	for _, dl := range ledger {
		ledgerByLane[dl.CorrelationID] = append(ledgerByLane[dl.CorrelationID], dl)
	}
	lanes := make(map[string]bool, len(byLane)+len(ledgerByLane))
	for l := range byLane {
		lanes[l] = true
	}
	for l := range ledgerByLane {
		lanes[l] = true
	}
	for _, name := range slices.Sorted(maps.Keys(lanes)) {
		r.Lanes = append(r.Lanes, checkLane(name, byLane[name], ledgerByLane[name], secrets))
	}
	return r, nil
}

func checkLane(name string, held []transport.Stored, ledger []Delivery, secrets []string) Lane {
	l := Lane{Lane: name, Stored: len(held)}
	seen := map[string]bool{}
	skippedInLedger := map[int64]bool{}
	for _, dl := range ledger {
		if dl.Skipped {
			skippedInLedger[dl.Sequence] = true
		}
	}
	var last int64
	for _, s := range held {
		if seen[s.EventID] {
			l.Repeated = append(l.Repeated, s.Sequence)
			continue
		}
		seen[s.EventID] = true
		if s.Sequence <= last {
			l.OutOfOrder = append(l.OutOfOrder, s.Sequence)
		} else {
			if s.Previous != last && !slices.Contains(s.Skipped, last) {
				l.ChainBreaks = append(l.ChainBreaks, s.Sequence)
			}
			last = s.Sequence
		}
		if skippedInLedger[s.Sequence] {
			l.WrittenSkipped = append(l.WrittenSkipped, s.Sequence)
		}
		if standard.Verify(secrets, s.EventID, strconv.FormatInt(s.Timestamp, 10), s.Signature, s.Body, time.Unix(s.Timestamp, 0), time.Minute) != nil {
			l.BadSignature = append(l.BadSignature, s.Sequence)
		}
	}
	for _, dl := range ledger {
		if !dl.Delivered {
			continue
		}
		l.Delivered++
		if !seen[dl.EventID] {
			l.Missing = append(l.Missing, dl.Sequence)
		}
	}
	slices.Sort(l.Missing)
	return l
}

// Print writes the report as a table, a line per lane with a finding (or
// every lane when verbose), and its totals.
func (r Report) Print(w io.Writer, verbose bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LANE\tDELIVERED\tSTORED\tMISSING\tREPEATED\tOUT OF ORDER\tCHAIN BREAKS\tWRITTEN BUT SKIPPED\tBAD SIGNATURE")
	row := func(l Lane) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Lane, l.Delivered, l.Stored, seqs(l.Missing), seqs(l.Repeated),
			seqs(l.OutOfOrder), seqs(l.ChainBreaks), seqs(l.WrittenSkipped), seqs(l.BadSignature))
	}
	for _, l := range r.Lanes {
		if verbose || len(l.Missing)+len(l.Repeated)+len(l.OutOfOrder)+len(l.ChainBreaks)+len(l.WrittenSkipped)+len(l.BadSignature) > 0 {
			row(l)
		}
	}
	t := r.Totals()
	t.Lane = fmt.Sprintf("all %d lanes", len(r.Lanes))
	row(t)
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	repeats := "repeats fail"
	if r.RepeatsAllowed {
		repeats = "repeats allowed (at least once)"
	}
	_, err := fmt.Fprintf(w, "destination %s: %s (foreign=%d, %s)\n", r.EndpointID, verdict, r.Foreign, repeats)
	return err
}

// seqs shows a list of sequences briefly: its count and its first few.
func seqs(s []int64) string {
	if len(s) == 0 {
		return "0"
	}
	s = slices.Clone(s)
	slices.Sort(s)
	out := strconv.Itoa(len(s)) + " ("
	for i, n := range s {
		if i == 5 {
			out += ",…"
			break
		}
		if i > 0 {
			out += ","
		}
		out += strconv.FormatInt(n, 10)
	}
	return out + ")"
}
