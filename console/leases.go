package console

// leaseRow is one lease as the running-jobs view shows it.
type leaseRow struct {
	Key         string `json:"key"`   // the idempotency key, or the lease name
	Idempotency bool   `json:"idem"`  // the lease is an idempotency key's (a job's)
	Owner       string `json:"owner"` // digest of the owner token
	Fence       uint64 `json:"fence,string"`
	RemainingMS int64  `json:"remaining_ms"`
	State       string `json:"state,omitempty"`
	Attempt     int    `json:"attempt,omitempty"`
	Details     string `json:"details,omitempty"` // the last heartbeat details, cut to maxDetails
	DetailsSize int    `json:"details_size,omitempty"`
	DetailsAge  int64  `json:"details_kept_ms,omitempty"`
	Type        string `json:"type,omitempty"`       // the job type (only known in a worker process)
	ElapsedMS   int64  `json:"elapsed_ms,omitempty"` // since the attempt's claim
	ElapsedFrom string `json:"elapsed_from,omitempty"`
	TraceURL    string `json:"trace_url,omitempty"`
	Error       string `json:"error,omitempty"`
}

// maxDetails bounds the heartbeat details a page receives, in bytes.
const maxDetails = 512
