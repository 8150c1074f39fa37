package jobtrace

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Span names of operator actions on one key or record (see
// [Tracer.StartOperator]).
const (
	SpanReset     = "reset"
	SpanDLQReplay = "dlq replay"
)

// AttrForce records whether an operator forced an action (a reset that ends
// a live lease).
const AttrForce = "leasehold.force"

// StartOperator starts the span of an operator's action on idempotency key
// key (name is SpanReset or SpanDLQReplay), a root span unless ctx carries
// one, with the redacted key and attrs. End it with the action's outcome.
func (t *Tracer) StartOperator(ctx context.Context, name, key string, attrs ...attribute.KeyValue) (context.Context, *Span) {
	a := make([]attribute.KeyValue, 0, len(attrs)+1)
	if k, ok := t.cfg.redact.redact(key); ok {
		a = append(a, attribute.String(AttrIdempotencyKey, k))
	}
	ctx, sp := t.tracer.Start(ctx, truncate(name, maxNameLen), trace.WithAttributes(append(a, attrs...)...))
	s := &Span{span: sp, t: t, key: key}
	return context.WithValue(ctx, spanKey{}, s), s
}
