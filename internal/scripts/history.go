package scripts

// IdemHistory writes one event (an attempt's start, its end, or one of its
// compensation steps) into an idempotency key's bounded attempt history
// (idem_history.lua). Used by package idempotency.
var IdemHistory = Plain("idem_history.lua")

// IdemHistoryOK is IdemHistory's only answer: the event was written.
const IdemHistoryOK = 1
