package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/audit"
)

// AuditFigures is what `worker audit` made of the run's jobs topic once
// the jobs drained: every record accounted for, or not.
type AuditFigures struct {
	Records     int64
	Counts      map[audit.Outcome]int64
	Unaccounted []audit.Entry // the first ones listed
}

// audit runs `worker audit` over the whole jobs topic, against the run's
// Redis directly (not through a link) and its brokers, as an operator
// would after the run. Its progress goes to audit.log in the run
// directory.
func (r *run) audit(ctx context.Context) (*AuditFigures, error) {
	logPath := filepath.Join(r.dir, "audit.log")
	logf, err := os.Create(logPath) //nolint:gosec // the run's own directory
	if err != nil {
		return nil, err
	}
	defer func() { _ = logf.Close() }()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, r.workerBin, "audit", "--json", //nolint:gosec // the run's own worker binary
		"--brokers", r.brokerAdr, "--redis", "redis://"+r.redis.Addr()+"/0", "--topics", leasehold.DefaultTopic,
		"--retention", r.cfg.Retention.String())
	cmd.Stdout, cmd.Stderr = &out, logf
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
		return nil, fmt.Errorf("chaos: worker audit: %w (see %s)", err, logPath)
	}
	var rep audit.Report
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		return nil, fmt.Errorf("chaos: worker audit printed no report: %w (see %s)", jerr, logPath)
	}
	for _, e := range rep.Unaccounted {
		r.log.Error("audit: record unaccounted for", slog.Int("partition", int(e.Partition)), slog.Int64("offset", e.Offset),
			slog.String("key", e.Key), slog.String("why", e.Reason))
	}
	return &AuditFigures{Records: rep.Records, Counts: rep.Counts, Unaccounted: rep.Unaccounted}, nil
}

// auditUnaccounted is the must-be-zero audit figure (0 when not audited).
func (f Figures) auditUnaccounted() int {
	if f.Audit == nil {
		return 0
	}
	return int(f.Audit.Counts[audit.Unaccounted])
}

// auditLines are the audit's figures (none when the run did not audit).
func (f Figures) auditLines() []line {
	a := f.Audit
	if a == nil {
		return nil
	}
	return []line{
		{"audit_records", a.Records, "records"},
		{"audit_completed", a.Counts[audit.Completed], "records"},
		{"audit_duplicates", a.Counts[audit.Duplicate], "records"},
		{"audit_dead_lettered", a.Counts[audit.DeadLettered], "records"},
		{"audit_failed", a.Counts[audit.Failed], "records"},
		{"audit_cancelled", a.Counts[audit.Cancelled], "records"},
		{"audit_running", a.Counts[audit.Running], "records"},
		{"audit_pending", a.Counts[audit.Pending], "records"},
		{"audit_expired", a.Counts[audit.Expired], "records"},
		{"audit_unaccounted", a.Counts[audit.Unaccounted], "records"},
	}
}
