package jobtrace

import "github.com/twmb/franz-go/pkg/kgo"

// Unexported helpers the external tests call.
var (
	JobFromContext  = jobFromContext
	SpanFromContext = spanFromContext
	LeaseLostCause  = leaseLostCause
)

// Records reports whether a span t starts now could record.
func (t *Tracer) Records() bool { return t.records() }

// KgoHooks returns the hooks KgoOpt installs.
func (t *Tracer) KgoHooks() []kgo.Hook { return t.hooks }
