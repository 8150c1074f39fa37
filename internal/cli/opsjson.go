package cli

import (
	"encoding/json"
	"io"
	"time"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
)

// natLess orders strings naturally: runs of digits compare as numbers, so
// job-2 comes before job-10.
func natLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := isDigit(a[0]), isDigit(b[0])
		switch {
		case da && db:
			na, ra := digits(a)
			nb, rb := digits(b)
			// Compare the numbers without leading zeros by length, then
			// digit by digit (no overflow); equal numbers: fewer zeros first.
			ta, tb := trimZeros(na), trimZeros(nb)
			if len(ta) != len(tb) {
				return len(ta) < len(tb)
			}
			if ta != tb {
				return ta < tb
			}
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			a, b = ra, rb
		case a[0] != b[0]:
			return a[0] < b[0]
		default:
			a, b = a[1:], b[1:]
		}
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digits(s string) (string, string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}

// leaseJSON is one lease in `worker leases --json`.
type leaseJSON struct {
	Key         string  `json:"key"`
	LeaseKey    string  `json:"lease_key"`
	Owner       string  `json:"owner"` // a digest of the owner token
	Fence       uint64  `json:"fence"`
	RemainingMS int64   `json:"remaining_ms"`
	State       string  `json:"state,omitempty"` // the record's, for an idempotency key's lease
	Attempt     int     `json:"attempt,omitempty"`
	Details     *string `json:"details,omitempty"` // the last heartbeat details
	DetailsSize int     `json:"details_size,omitempty"`
	Error       string  `json:"error,omitempty"` // the record could not be read
}

func writeLeasesJSON(w io.Writer, leases []inspect.Lease) error {
	out := struct {
		Leases []leaseJSON `json:"leases"`
	}{Leases: make([]leaseJSON, 0, len(leases))}
	for _, l := range leases {
		j := leaseJSON{Key: l.Name, LeaseKey: l.LeaseKey, Owner: l.Owner, Fence: l.Fence, RemainingMS: l.Remaining.Milliseconds()}
		switch {
		case l.RecordErr != nil:
			j.State, j.Error = "unreadable", oneLine(l.RecordErr)
		case l.Record != nil:
			j.State = l.Record.State.String()
			j.Attempt = l.Record.Attempt
			if l.Record.HasDetails {
				d := string(l.Record.Details)
				j.Details, j.DetailsSize = &d, l.Record.DetailsSize
			}
		}
		out.Leases = append(out.Leases, j)
	}
	return writeJSON(w, out)
}

// inspectJSON is `worker inspect --json`.
type inspectJSON struct {
	Key        string      `json:"key"`
	ClusterTag string      `json:"cluster_tag"`
	LeaseKey   string      `json:"lease_key"`
	Lease      *leaseState `json:"lease"` // null when no lease is held
	Record     recordJSON  `json:"record"`
}

type leaseState struct {
	Owner       string `json:"owner"`
	Fence       uint64 `json:"fence"`
	RemainingMS int64  `json:"remaining_ms"`
}

type recordJSON struct {
	State        string     `json:"state"`
	Type         string     `json:"type,omitempty"` // the job's type, from the key's history
	Fence        uint64     `json:"fence,omitempty"`
	Attempt      int        `json:"attempt,omitempty"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
	ResultSize   *int       `json:"result_size,omitempty"` // the result, or the error text of a FAILED record
	Error        *string    `json:"error,omitempty"`       // a FAILED record's error text
	HoldUntil    *time.Time `json:"hold_until,omitempty"`
	Details      *string    `json:"details,omitempty"`
	DetailsSize  int        `json:"details_size,omitempty"`
	DetailsTTLMS int64      `json:"details_ttl_ms,omitempty"`
}

func newInspectJSON(ki inspect.KeyInfo) inspectJSON {
	j := inspectJSON{Key: ki.Key, ClusterTag: ki.Tag, LeaseKey: ki.LeaseKey, Record: recordJSON{State: ki.State.String(), Type: ki.Type}}
	if ki.Leased {
		j.Lease = &leaseState{Owner: ki.Owner, Fence: ki.LeaseFence, RemainingMS: ki.Remaining.Milliseconds()}
	}
	r := &j.Record
	if ki.State != idempotency.Absent {
		r.Fence, r.Attempt = ki.Fence, ki.Attempt
	}
	switch ki.State {
	case idempotency.Completed, idempotency.Failed:
		at, size := ki.FinishedAt.UTC(), ki.ResultSize
		r.FinishedAt, r.ResultSize = &at, &size
		if ki.State == idempotency.Failed {
			e := ki.Failure
			size = len(e)
			r.Error = &e
		}
	case idempotency.Released:
		if !ki.HoldUntil.IsZero() {
			hu := ki.HoldUntil.UTC()
			r.HoldUntil = &hu
		}
	}
	if ki.HasDetails {
		d := string(ki.Details)
		r.Details, r.DetailsSize, r.DetailsTTLMS = &d, ki.DetailsSize, ki.DetailsTTL.Milliseconds()
	}
	return j
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
