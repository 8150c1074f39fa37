package leasehold

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/lease"
)

// treatment is how the worker acts on an error of the store.
type treatment string

const (
	outage    treatment = "outage"     // matches ErrUnavailable: fail closed, nothing moves
	leaseLost treatment = "lease lost" // matches ErrLeaseLost: no commit, the saga is compensated
	retried   treatment = "retried"    // an answer: the record is tried again after a backoff
	terminal  treatment = "terminal"   // an answer that retrying cannot change
	handler   treatment = "handler"    // made by a handler's own writes, read by the job's retry policy
)

// sentinelTreatments lists every exported sentinel of the root, lease,
// idempotency, compensation and fence packages with its treatment.
// TestEverySentinelHasATreatment keeps the list complete.
var sentinelTreatments = map[string]struct {
	err  error
	want treatment
}{
	"leasehold.ErrLeaseLost":           {ErrLeaseLost, leaseLost},
	"leasehold.ErrUnavailable":         {ErrUnavailable, outage},
	"leasehold.ErrTopicMissing":        {ErrTopicMissing, terminal},
	"leasehold.ErrInvalidKey":          {ErrInvalidKey, terminal},
	"leasehold.ErrInvalidJobType":      {ErrInvalidJobType, terminal},
	"leasehold.ErrDuplicateType":       {ErrDuplicateType, terminal},
	"leasehold.ErrInvalidLeaseTTL":     {ErrInvalidLeaseTTL, terminal},
	"leasehold.ErrUnknownType":         {ErrUnknownType, terminal},
	"leasehold.ErrPayloadTooLarge":     {ErrPayloadTooLarge, terminal},
	"leasehold.ErrFingerprintMismatch": {ErrFingerprintMismatch, terminal},
	"leasehold.ErrPermanent":           {ErrPermanent, terminal},
	"leasehold.ErrCorruptRecord":       {ErrCorruptRecord, terminal},
	"leasehold.ErrAttemptsExhausted":   {ErrAttemptsExhausted, terminal},
	"leasehold.ErrResultTooLarge":      {ErrResultTooLarge, terminal},
	"leasehold.ErrShutdown":            {ErrShutdown, leaseLost},
	"leasehold.ErrClosed":              {ErrClosed, terminal},
	"leasehold.ErrNotStarted":          {ErrNotStarted, terminal},
	"leasehold.ErrConflictingOptions":  {ErrConflictingOptions, terminal},
	"leasehold.ErrNoCompensation":      {ErrNoCompensation, terminal},
	"leasehold.ErrNoHandlers":          {ErrNoHandlers, terminal},
	"leasehold.ErrUndecodable":         {ErrUndecodable, terminal},
	"leasehold.ErrNoWorker":            {ErrNoWorker, terminal},
	"leasehold.ErrCancelled":           {ErrCancelled, terminal},
	"leasehold.ErrRetryAfter":          {ErrRetryAfter, retried},

	"lease.ErrHeld":           {lease.ErrHeld, retried},
	"lease.ErrLost":           {lease.ErrLost, leaseLost},
	"lease.ErrStolen":         {lease.ErrStolen, leaseLost},
	"lease.ErrExpired":        {lease.ErrExpired, leaseLost},
	"lease.ErrRenewDeadline":  {lease.ErrRenewDeadline, leaseLost},
	"lease.ErrReleased":       {lease.ErrReleased, leaseLost},
	"lease.ErrUnavailable":    {lease.ErrUnavailable, outage},
	"lease.ErrClosed":         {lease.ErrClosed, outage},
	"lease.ErrNotStarted":     {lease.ErrNotStarted, outage},
	"lease.ErrInvalid":        {lease.ErrInvalid, terminal},
	"lease.ErrEvictionPolicy": {lease.ErrEvictionPolicy, terminal},

	"idempotency.ErrLeaseLost":        {idempotency.ErrLeaseLost, leaseLost},
	"idempotency.ErrRefused":          {idempotency.ErrRefused, leaseLost},
	"idempotency.ErrGivenUp":          {idempotency.ErrGivenUp, retried},
	"idempotency.ErrAlreadyCommitted": {idempotency.ErrAlreadyCommitted, terminal},
	"idempotency.ErrOutcomeUnknown":   {idempotency.ErrOutcomeUnknown, outage},
	"idempotency.ErrUnavailable":      {idempotency.ErrUnavailable, outage},
	"idempotency.ErrMismatch":         {idempotency.ErrMismatch, terminal},
	"idempotency.ErrInvalidKey":       {idempotency.ErrInvalidKey, terminal},
	"idempotency.ErrInvalidTTL":       {idempotency.ErrInvalidTTL, terminal},
	"idempotency.ErrTooLarge":         {idempotency.ErrTooLarge, terminal},
	"idempotency.ErrEvictionPolicy":   {idempotency.ErrEvictionPolicy, terminal},
	"idempotency.ErrPolicyUnknown":    {idempotency.ErrPolicyUnknown, terminal},
	"idempotency.ErrFailed":           {idempotency.ErrFailed, terminal},
	"idempotency.ErrNotClaimed":       {idempotency.ErrNotClaimed, terminal},
	"idempotency.ErrLayoutChanged":    {idempotency.ErrLayoutChanged, terminal},
	"idempotency.ErrCorrupt":          {idempotency.ErrCorrupt, terminal},

	"compensation.ErrUnknownHandler":   {compensation.ErrUnknownHandler, terminal},
	"compensation.ErrDuplicateHandler": {compensation.ErrDuplicateHandler, terminal},
	"compensation.ErrInvalid":          {compensation.ErrInvalid, terminal},
	"compensation.ErrNotOpen":          {compensation.ErrNotOpen, leaseLost},
	"compensation.ErrTooManySteps":     {compensation.ErrTooManySteps, terminal},
	"compensation.ErrLateEffect":       {compensation.ErrLateEffect, terminal},
	"compensation.ErrDeadLettered":     {compensation.ErrDeadLettered, terminal},
	"compensation.ErrBusy":             {compensation.ErrBusy, retried},
	"compensation.ErrUnavailable":      {compensation.ErrUnavailable, outage},
	"compensation.ErrClosed":           {compensation.ErrClosed, outage},
	"compensation.ErrCommitUnknown":    {compensation.ErrCommitUnknown, outage},

	// fence's errors come from a handler's own database writes, never from
	// the store. ErrStaleFence means a newer owner wrote: it matches
	// ErrLeaseLost, so the attempt settles as a lost lease
	// (TestStaleFenceSettlesAsLostLease). The other two are handler errors
	// (retried, unless wrapped with Permanent).
	"fence.ErrStaleFence":      {fence.ErrStaleFence, leaseLost},
	"fence.ErrInvalidFence":    {fence.ErrInvalidFence, handler},
	"fence.ErrInvalidResource": {fence.ErrInvalidResource, handler},
}

// TestStoreErrorTreatment drives every sentinel, bare and wrapped as a store
// call wraps it, through the worker's reading of store errors (mapStoreErr)
// and checks what the worker does with it.
func TestStoreErrorTreatment(t *testing.T) {
	t.Parallel()
	for name, s := range sentinelTreatments {
		if s.want == handler {
			if c := leasing.ClassOf(s.err); c != leasing.ClassNone {
				t.Errorf("%s: class %s, want none (a handler's error)", name, c)
			}
			continue
		}
		for _, in := range []error{s.err, fmt.Errorf("leasehold: claim of %q: %w", "k", s.err)} {
			got := mapStoreErr(in)
			var treated treatment
			switch {
			case errors.Is(got, ErrUnavailable):
				treated = outage
			case errors.Is(got, ErrLeaseLost):
				treated = leaseLost
			case leasing.ClassOf(got) == leasing.ClassRetry:
				treated = retried
			case leasing.ClassOf(got) == leasing.ClassTerminal:
				treated = terminal
			}
			if treated != s.want {
				t.Errorf("%s: mapStoreErr(%v) = %v, treated as %q, want %q", name, in, got, treated, s.want)
			}
			if !errors.Is(got, s.err) {
				t.Errorf("%s: mapStoreErr(%v) = %v no longer matches it", name, in, got)
			}
		}
	}
}

// TestEverySentinelHasATreatment: every exported Err* variable of the five
// packages' errors.go is in sentinelTreatments, so that a new sentinel gets
// a class where it is made and a line here.
func TestEverySentinelHasATreatment(t *testing.T) {
	t.Parallel()
	for pkg, file := range map[string]string{"leasehold": "errors.go", "lease": "lease/errors.go",
		"idempotency": "idempotency/errors.go", "compensation": "compensation/errors.go", "fence": "fence/errors.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
						if _, ok := sentinelTreatments[pkg+"."+n.Name]; !ok {
							t.Errorf("%s.%s (%s) has no line in sentinelTreatments: give it a class where it is made and add it", pkg, n.Name, file)
						}
					}
				}
			}
		}
	}
}
