package jobtrace

// Unexported helpers the external tests call.
var (
	JobFromContext  = jobFromContext
	SpanFromContext = spanFromContext
	LeaseLostCause  = leaseLostCause
)
