package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/leasehold/leasehold"
)

// DefaultGroupMinSessionTimeout is the dev-broker's default smallest group
// session timeout: kfake's and Apache Kafka's own default
// (group.min.session.timeout.ms=6000).
const DefaultGroupMinSessionTimeout = 6 * time.Second

func cmdDevBroker(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "dev-broker", "")
	listen := f.str("listen", "LEASEHOLD_DEV_BROKER", "127.0.0.1:9092", "address to listen on")
	topics := f.String("topics", leasehold.DefaultTopic+":6,"+leasehold.DefaultTopic+".dlq:1", "topics to create: name[:partitions],...")
	minSession := f.Duration("group-min-session-timeout", DefaultGroupMinSessionTimeout,
		"smallest session timeout a group member may ask for (group.min.session.timeout.ms); lower it to let members that die leave the group sooner")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	if *minSession < time.Millisecond {
		return usagef("group min session timeout %v: want at least 1ms", *minSession)
	}
	specs, err := parseTopics(*topics, 6)
	if err != nil {
		return err
	}
	c, err := e.application().startEmbeddedKafka(ctx, *listen, specs, *minSession)
	if err != nil {
		return err
	}
	defer c.Close()
	// One line on stdout that scripts can wait for.
	_, _ = fmt.Fprintf(e.Stdout, "dev-broker listening on %s\n", c.ListenAddrs()[0])
	<-ctx.Done()
	return nil
}

func cmdPaymentStub(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "payment-stub", "")
	listen := f.str("listen", "LEASEHOLD_PAYSTUB_LISTEN", "127.0.0.1:8099", "address to listen on")
	level := f.String("log-level", "info", "debug, info, warn or error")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	log, err := newLogger(e.Stderr, *level, "text")
	if err != nil {
		return err
	}
	if err := checkListen("--listen", *listen); err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *listen)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(e.Stdout, "payment-stub listening on %s\n", ln.Addr())
	err = e.application().dev.ServePaymentStub(ctx, ln, log)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
