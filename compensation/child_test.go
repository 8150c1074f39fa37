package compensation_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/paystub"
	"github.com/leasehold/leasehold/internal/testkit"
)

// The crash tests run scenarios in a child process (this test binary,
// re-executed with childEnv set) that dies with os.Exit at a chosen point.
const (
	childEnv   = "LH_COMP_CHILD"
	childRedis = "LH_COMP_REDIS"
	childPref  = "LH_COMP_PREFIX"
	childPay   = "LH_COMP_PAY"
	childName  = "LH_COMP_NAME"

	exitCrashed = 3
)

type refundArgs struct {
	ChargeID string `json:"charge_id"`
}

// refundHandler undoes a charge; a charge that never happened needs no
// refund, and the provider refunds a charge once however often it is asked.
func refundHandler(pay *paystub.Client, crash bool) func(context.Context, refundArgs) error {
	return func(ctx context.Context, a refundArgs) error {
		err := pay.Refund(ctx, a.ChargeID)
		if crash {
			os.Exit(exitCrashed) // dies after the refund, before it is recorded
		}
		if errors.Is(err, paystub.ErrNoCharge) {
			return nil
		}
		return err
	}
}

func runChild(scenario string) int {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: os.Getenv(childRedis)})
	prefix, name := os.Getenv(childPref), os.Getenv(childName)
	pay := paystub.NewClient(os.Getenv(childPay), nil)
	m := newManager(childTB{}, c, prefix, true)
	reg := compensation.NewRegistry()
	compensation.MustRegister(reg, "pay.refund", refundHandler(pay, scenario == "crash-mid-compensation"))
	r := newRunner(childTB{}, c, prefix, m, reg)
	l, err := m.Acquire(ctx, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "acquire:", err)
		return 1
	}
	fmt.Printf("fence=%d\n", l.Fence())
	j := r.Journal(l)
	charge := name + "/" + strconv.FormatUint(l.Fence(), 10)
	step := func(crashBefore, crashAfter bool) error {
		return j.Step(ctx, "charge", func(ctx context.Context) error {
			if crashBefore {
				os.Exit(exitCrashed)
			}
			err := pay.Charge(ctx, charge, "alice", 100)
			if crashAfter {
				os.Exit(exitCrashed)
			}
			return err
		}, "pay.refund", refundArgs{ChargeID: charge})
	}
	switch scenario {
	case "crash-before-effect":
		err = step(true, false)
	case "crash-after-effect":
		err = step(false, true)
	case "crash-mid-compensation":
		if err = step(false, false); err == nil {
			err = j.Compensate(ctx)
		}
	default:
		err = fmt.Errorf("unknown scenario %q", scenario)
	}
	fmt.Fprintln(os.Stderr, "scenario did not crash:", err)
	return 1
}

// childTB lets the test helpers run in the child, where no *testing.T exists.
type childTB struct{ testing.TB }

func (childTB) Helper()                   {}
func (childTB) Cleanup(func())            {}
func (childTB) Fatal(args ...any)         { fmt.Fprintln(os.Stderr, args...); os.Exit(1) }
func (childTB) Errorf(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }

// crashChild runs scenario in a child process, which must die with
// exitCrashed, and returns the fence it acquired.
func crashChild(t *testing.T, e *env, payURL, name, scenario string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+scenario, childRedis+"="+e.client.(*redis.Client).Options().Addr,
		childPref+"="+e.prefix, childPay+"="+payURL, childName+"="+name)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitCrashed {
		t.Fatalf("child %s: %v, want exit %d\nstdout: %s\nstderr: %s", scenario, err, exitCrashed, &stdout, &stderr)
	}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "fence="); ok {
			f, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("child %s printed no fence: %s", scenario, &stdout)
	return 0
}

// TestCrashRecovery kills a process at three points of a saga; another
// process's sweep finishes the work once the dead process's leases expire,
// and the charge is refunded exactly once (or, when it never happened, not
// at all).
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scenario       string
		charged        bool
		refundRequests int // received by the provider, over both processes
		attempts       int // compensation attempts recorded in the journal
		inDoubt        bool
	}{
		{scenario: "crash-before-effect", charged: false, refundRequests: 1, attempts: 1, inDoubt: true},
		{scenario: "crash-after-effect", charged: true, refundRequests: 1, attempts: 1, inDoubt: true},
		{scenario: "crash-mid-compensation", charged: true, refundRequests: 2, attempts: 2, inDoubt: false},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			stub := paystub.New()
			hs := httptest.NewServer(stub)
			defer hs.Close()
			name := "transfer-" + tc.scenario
			fence := crashChild(t, e, hs.URL, name, tc.scenario)
			ref := compensation.Ref{Name: name, Fence: fence}

			reg := compensation.NewRegistry()
			compensation.MustRegister(reg, "pay.refund", refundHandler(paystub.NewClient(hs.URL, hs.Client()), false))
			r := e.runner(e.manager(false), reg)
			ctx := t.Context()
			start := time.Now()
			testkit.Eventually(t, 10*time.Second, "sweep compensates the dead process's journal", func() bool {
				if _, err := r.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
				info, err := r.Inspect(ctx, ref)
				return err == nil && info.State == compensation.StateCompensated
			})
			t.Logf("scenario=%s recovered_after=%s", tc.scenario, time.Since(start).Round(time.Millisecond))
			info, err := r.Inspect(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if s := info.Steps[0]; s.Attempts != tc.attempts || s.Done == tc.inDoubt {
				t.Errorf("step %+v: want %d attempts, in doubt %v", s, tc.attempts, tc.inDoubt)
			}
			led := stub.Ledger()
			ch, ok := led.Charge(name + "/" + strconv.FormatUint(fence, 10))
			if ok != tc.charged {
				t.Fatalf("charged %v, want %v", ok, tc.charged)
			}
			applied := 0
			if tc.charged {
				applied = 1
				if !ch.Refunded {
					t.Error("charge not refunded")
				}
			}
			if led.RefundsApplied != applied || led.RefundRequests != tc.refundRequests {
				t.Errorf("ledger %+v: want %d refund applied, %d requested", led, applied, tc.refundRequests)
			}
			if _, err := r.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			if got := stub.Ledger().RefundRequests; got != tc.refundRequests {
				t.Errorf("a later sweep sent more refunds: %d", got)
			}
		})
	}
}
