package deadletter

// Record headers leasehold reads and writes. The root package re-exports
// each under its historical name (HeaderDLQReason for HeaderReason, ...).
const (
	// HeaderKey carries a job's idempotency key.
	HeaderKey = "idempotency-key"
	// HeaderType carries a job's type.
	HeaderType = "job-type"

	// HeaderPrefix begins the name of every header a dead-letter copy adds:
	// a replay removes the headers that have it.
	HeaderPrefix = "dlq-"
	// HeaderReason names why a record was dead-lettered (a Reason* value).
	HeaderReason = "dlq-reason"
	// HeaderError carries the error text, cut to 1 KiB.
	HeaderError = "dlq-error"
	// HeaderTopic, HeaderPartition and HeaderOffset locate the original
	// record.
	HeaderTopic     = "dlq-original-topic"
	HeaderPartition = "dlq-original-partition"
	HeaderOffset    = "dlq-original-offset"
	// HeaderCluster and HeaderTopicID carry the original's cluster ID and
	// topic ID (base64 URL without padding, as Kafka's tools print it): with
	// them the coordinates name one record across a cluster replaced or a
	// topic created again.
	HeaderCluster = "dlq-original-cluster"
	HeaderTopicID = "dlq-original-topic-id"
	// HeaderTruncated marks a stand-in copy: the dead-letter topic refused
	// the whole copy as too large, so the stand-in carries no value and the
	// original's headers cut short; its value says why and how large the
	// original was.
	HeaderTruncated = "dlq-truncated"
)

// Dead-letter reasons (values of the HeaderReason header).
const (
	ReasonMissingKey       = "missing-key"
	ReasonInvalidKey       = "invalid-key"
	ReasonInvalidType      = "invalid-type"
	ReasonUnknownType      = "unknown-type"
	ReasonPayloadTooLarge  = "payload-too-large"
	ReasonMismatch         = "fingerprint-mismatch"
	ReasonUndecodable      = "undecodable"
	ReasonPermanent        = "permanent-failure"
	ReasonAttemptsExceeded = "attempts-exhausted"
	ReasonCorruptRecord    = "corrupt-record"
	ReasonResultTooLarge   = "result-too-large"
	// ReasonDeliveryLimit is a share group's record that its worker held
	// without an outcome (parked, or its job still running) at its last
	// delivery when it stopped: the release its close makes would let the
	// broker archive it.
	ReasonDeliveryLimit = "delivery-limit"
)

// Reasons returns every dead-letter reason, in the order above.
func Reasons() []string {
	return []string{
		ReasonMissingKey, ReasonInvalidKey, ReasonInvalidType, ReasonUnknownType, ReasonPayloadTooLarge,
		ReasonMismatch, ReasonUndecodable, ReasonPermanent, ReasonAttemptsExceeded, ReasonCorruptRecord,
		ReasonResultTooLarge, ReasonDeliveryLimit,
	}
}
