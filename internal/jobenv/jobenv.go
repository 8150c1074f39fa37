// Package jobenv is the seam between a leasehold.Job and what runs it: the
// worker, or package leaseholdtest in a handler's unit test. The root
// package and leaseholdtest both import it (the layout of Temporal's Go SDK,
// whose testsuite builds activity environments through an internal
// package), so that a test can build a Job without widening the root API.
package jobenv

import (
	"context"
	"log/slog"

	"github.com/leasehold/leasehold/compensation"
)

// Env runs a Job's effects outside a worker. A Job built over an Env sends
// its heartbeats, saga steps and logging here; the checks the Job makes
// itself (the size bound of heartbeat details, a lost lease, a typed undo
// handle's registry) come first.
type Env interface {
	// Heartbeat records details (already copied and checked).
	Heartbeat(ctx context.Context, details []byte) error
	// Registry returns the compensation handlers that saga steps may name,
	// or nil when steps are refused (leasehold.ErrNoCompensation).
	Registry() *compensation.Registry
	// Step runs one saga step whose undo handler is registered in Registry.
	Step(ctx context.Context, name string, do func(context.Context) error, undo string, args any) error
	// Logger returns the logger under the job's attributes.
	Logger() *slog.Logger
}

// Spec describes the Job to build.
type Spec struct {
	Key      string
	Type     string
	Payload  []byte
	Headers  map[string]string
	Attempt  int
	Takeover bool
	Fence    uint64
	// Last is the previous attempt's heartbeat details.
	Last []byte
	// Ctx is the job's context (Job.Context), cancelled with the cause
	// leasehold.ErrLeaseLost when the test takes the lease away.
	Ctx context.Context
	Env Env
}

// NewJob builds a *leasehold.Job from spec. Package leasehold sets it in
// its init, so that it is set in every program that can name the type.
var NewJob func(spec Spec) any
