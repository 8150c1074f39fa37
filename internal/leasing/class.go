package leasing

import "errors"

// Class is how the worker treats an error of the store, decided where the
// error is made: each sentinel of lease, idempotency and compensation
// carries its class ([NewError]), and an error made of others (a sentinel
// wrapping a parent, a detail-carrying struct matching a sentinel) gets its
// class from them.
type Class uint8

// Classes of errors.
const (
	// ClassNone: the error carries no class (an error of go-redis, the
	// network or the caller); [Classify] reads it.
	ClassNone Class = iota
	// ClassOutage: Redis cannot be reached or cannot take the call now.
	// Nothing moves: the record waits, fetching pauses, the call is sent
	// again once Redis answers.
	ClassOutage
	// ClassLeaseLost: the caller no longer owns the lease; its writes are
	// refused and its saga is compensated.
	ClassLeaseLost
	// ClassRetry: this call cannot succeed now, a later one may (the key is
	// held elsewhere, the lease was given back): the record is tried again
	// after a backoff.
	ClassRetry
	// ClassTerminal: an answer that retrying cannot change (a bad argument,
	// a configuration Redis refuses, a record that is what it is).
	ClassTerminal
)

func (c Class) String() string {
	switch c {
	case ClassOutage:
		return "outage"
	case ClassLeaseLost:
		return "lease lost"
	case ClassRetry:
		return "retry"
	case ClassTerminal:
		return "terminal"
	}
	return "none"
}

// classError is a sentinel that carries its class.
type classError struct {
	msg   string
	class Class
}

func (e *classError) Error() string     { return e.msg }
func (e *classError) errorClass() Class { return e.class }

// classified lists every error made by [NewError], for detail-carrying error
// types that match a sentinel through an Is method rather than Unwrap. It is
// written only while package variables are initialised.
var classified []*classError

// NewError returns a sentinel error that reads as msg and is of class c.
// Call it in package-level variable declarations only.
func NewError(msg string, c Class) error {
	e := &classError{msg: msg, class: c}
	classified = append(classified, e)
	return e
}

// ClassOf returns the class err was made with: that of the first error in
// its chain that carries one (a [NewSentinel] takes its parent's), else
// that of a classified sentinel it matches with errors.Is, else [ClassNone].
func ClassOf(err error) Class {
	if err == nil {
		return ClassNone
	}
	var c interface{ errorClass() Class }
	if errors.As(err, &c) {
		return c.errorClass()
	}
	for _, s := range classified {
		if errors.Is(err, s) {
			return s.class
		}
	}
	return ClassNone
}
