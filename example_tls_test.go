package leasehold_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/leasehold/leasehold"
)

// A worker against a Kafka cluster that requires TLS and SASL/SCRAM and a
// Redis that requires TLS and an ACL user (docs/security.md, "TLS and SASL",
// covers it). Secrets come from the environment and are read where they are
// used: the SCRAM password when a connection authenticates, the Redis
// password when a connection is made. None is put in an option that the
// worker or franz-go logs, in a span, or in an error message: only the
// names of missing variables are reported. This example dials, so it is
// only compiled.
func Example_tlsAndSASL() {
	tlsCfg, err := tlsConfig(os.Getenv("LEASEHOLD_TLS_CA_FILE")) // PEM bundle; empty: the system's roots
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range []string{"KAFKA_SASL_USER", "KAFKA_SASL_PASSWORD", "REDIS_USER", "REDIS_PASSWORD"} {
		if os.Getenv(v) == "" {
			log.Fatalf("set %s", v) // the name, never a value
		}
	}
	rdb := redis.NewClient(&redis.Options{
		Addr:      "redis.internal:6380",
		TLSConfig: tlsCfg.Clone(), // go-redis sets ServerName from Addr when it is empty
		// The ACL user of docs/security.md ("Least privilege"), its password
		// read at each new connection.
		CredentialsProvider: func() (string, string) { return os.Getenv("REDIS_USER"), os.Getenv("REDIS_PASSWORD") },
		DialTimeout:         5 * time.Second,
	})
	w, err := leasehold.New(rdb,
		leasehold.WithKafka(
			kgo.SeedBrokers("kafka-1.internal:9093", "kafka-2.internal:9093", "kafka-3.internal:9093"),
			kgo.DialTLSConfig(tlsCfg.Clone()), // kgo sets each broker's ServerName
			kgo.SASL(scram.Sha512(func(context.Context) (scram.Auth, error) {
				return scram.Auth{User: os.Getenv("KAFKA_SASL_USER"), Pass: os.Getenv("KAFKA_SASL_PASSWORD")}, nil
			})),
			kgo.Dialer((&net.Dialer{Timeout: 10 * time.Second}).DialContext),
		),
		leasehold.WithTopics("leasehold.jobs"),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Register("report.build", func(_ context.Context, job *leasehold.Job) ([]byte, error) {
		return []byte("built " + job.Key), nil
	}); err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// tlsConfig trusts the system's roots, plus the PEM bundle in caFile if
// one is given, and speaks TLS 1.2 or later.
func tlsConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, errors.New("no certificate in " + caFile)
	}
	cfg.RootCAs = roots
	return cfg, nil
}
