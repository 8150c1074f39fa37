package scripts

// DLQStamp opens the produce window of a dead-letter marker before its copy
// is produced, fenced by the record's dead-letter lock (dlq_stamp.lua).
var DLQStamp = Fenced("dlq_stamp.lua")

// Status codes of DLQStamp (besides StatusLost).
const (
	// DLQStamped: the window is open; the holder may produce the copy.
	DLQStamped = 1
	// DLQDone: the marker says the copy exists; produce nothing.
	DLQDone = 2
)
