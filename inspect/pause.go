package inspect

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/internal/pause"
)

// Pause pauses job type typ across the fleet: every worker reads the paused
// types once per lease renew round (a worker that starts later, before its
// first claim) and, from then on, holds the records of
// typ it polls (it does not claim or run them and does not commit their
// offsets; they count against its memory budget) until [Inspector.Resume].
// Jobs of typ already running finish. Pausing twice is harmless. A
// share-group worker (leasehold.WithShareGroup) that holds records of typ
// polls no new records, of any type, until the resume (docs/kafka.md).
func (i *Inspector) Pause(ctx context.Context, typ string) error {
	if err := pause.Pause(ctx, i.rdb, i.cfg.prefix, typ); err != nil {
		return err
	}
	i.cfg.logger.Warn("job type paused by operator", slog.String("type", typ))
	return nil
}

// Resume lifts the pause of job type typ: every worker claims the records
// it held within about two renew intervals (the round that reads the change,
// then the held records' next look). It reports whether typ was paused.
func (i *Inspector) Resume(ctx context.Context, typ string) (bool, error) {
	was, err := pause.Resume(ctx, i.rdb, i.cfg.prefix, typ)
	if err != nil {
		return false, err
	}
	i.cfg.logger.Warn("job type resumed by operator", slog.String("type", typ), slog.Bool("was_paused", was))
	return was, nil
}

// Paused returns the paused job types, with when each was paused.
func (i *Inspector) Paused(ctx context.Context) (map[string]time.Time, error) {
	return pause.Read(ctx, i.rdb, i.cfg.prefix)
}
