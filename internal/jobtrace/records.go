package jobtrace

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// providerKind tells what a Tracer's tracer provider can record.
type providerKind uint8

const (
	// providerAny may record: an SDK, or a provider of the user's own.
	providerAny providerKind = iota
	// providerNoop never records (noop.TracerProvider).
	providerNoop
	// providerGlobal is OpenTelemetry's default global provider, which
	// records once a program installs one with otel.SetTracerProvider
	// (it then delegates to it) and never before.
	providerGlobal
)

// globalPkg is the package of OpenTelemetry's default global tracer
// provider (an unexported type, known by its package only).
const globalPkg = "go.opentelemetry.io/otel/internal/global"

// kindOf classifies tp. A provider it does not recognise may record; so
// would the default global one if a later OpenTelemetry moved its type.
func kindOf(tp trace.TracerProvider) providerKind {
	if _, ok := tp.(noop.TracerProvider); ok {
		return providerNoop
	}
	if rt := reflect.TypeOf(tp); rt != nil && rt.Kind() == reflect.Pointer && rt.Elem().PkgPath() == globalPkg {
		return providerGlobal
	}
	return providerAny
}

// records reports whether a span started now could record. It is false
// only with a no-op provider, or with the default global provider while no
// provider is installed (otel.GetTracerProvider still returns it: an
// installed one replaces it there). Then the worker makes no job span and
// kotel no receive span: a non-recording span costs allocations and shows
// nothing. An incoming trace context still reaches the handler.
func (t *Tracer) records() bool {
	switch t.kind {
	case providerNoop:
		return false
	case providerGlobal:
		return otel.GetTracerProvider() != t.cfg.tp
	}
	return true
}

// fetchGate passes kotel's consumer hooks on only while a span can record
// ([Tracer.records]); its producer hooks always, since the publish span is
// what injects a trace context carried from upstream into the record.
type fetchGate struct {
	t  *Tracer
	kt *kotel.Tracer
}

var (
	_ kgo.HookProduceRecordBuffered   = fetchGate{}
	_ kgo.HookProduceRecordUnbuffered = fetchGate{}
	_ kgo.HookFetchRecordBuffered     = fetchGate{}
	_ kgo.HookFetchRecordUnbuffered   = fetchGate{}
)

func (g fetchGate) OnProduceRecordBuffered(r *kgo.Record) { g.kt.OnProduceRecordBuffered(r) }

func (g fetchGate) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	g.kt.OnProduceRecordUnbuffered(r, err)
}

func (g fetchGate) OnFetchRecordBuffered(r *kgo.Record) {
	if g.t.records() {
		g.kt.OnFetchRecordBuffered(r)
	}
}

// OnFetchRecordUnbuffered ends the receive span kotel started, if any (a
// record buffered before a provider was installed has none: ending the
// no-op span found instead does nothing).
func (g fetchGate) OnFetchRecordUnbuffered(r *kgo.Record, polled bool) {
	g.kt.OnFetchRecordUnbuffered(r, polled)
}
