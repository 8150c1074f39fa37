package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// WithPassword makes the server require password for the default user
// (requirepass). [StartRedis] still waits for the server: an anonymous PING
// answered with NOAUTH counts as up.
func WithPassword(password string) RedisOption {
	return WithRedisConfig("requirepass " + password)
}

// WithACLUser adds an ACL user with the given password and rules (see
// [ProjectACLRules]), and switches the default user off, so that every
// client has to log in as a named user.
func WithACLUser(name, password string, rules ...string) RedisOption {
	line := "user " + name + " on >" + password + " " + strings.Join(rules, " ")
	return WithRedisConfig(line, "user default off")
}

// ProjectACLRules returns the least-privilege ACL rules for a leasehold
// process whose keys all start with prefix: keys matching prefix* only, no
// Pub/Sub channels, and only the command categories the lease, idempotency
// and compensation scripts use (read, write, scripting, connection, and
// TIME, which the acquire script calls), without the dangerous ones
// (FLUSHALL, CONFIG SET, DEBUG, KEYS, ...). CONFIG GET is not granted: the
// lease manager's eviction-policy check is skipped when Redis refuses it.
func ProjectACLRules(prefix string) []string {
	return []string{
		"resetkeys", "~" + prefix + "*",
		"resetchannels",
		"-@all", "+@read", "+@write", "+@scripting", "+@connection", "+time",
		"-@dangerous",
	}
}

// TLS is a test certificate authority with a server certificate for
// 127.0.0.1 and a client certificate, written to files that redis-server
// reads. Make one with [NewTLS], pass [TLS.Option] to [StartRedis], and
// connect with [TLS.ClientOptions].
type TLS struct {
	// Port is the TLS port the server listens on (its plain port stays
	// open for the readiness check).
	Port int
	// CAFile, CertFile and KeyFile are PEM files: the CA certificate and
	// the server's certificate and key.
	CAFile, CertFile, KeyFile string
	// CAs holds the test CA, for client configurations.
	CAs *x509.CertPool
	// ClientCert is a certificate signed by the test CA, for mutual TLS.
	ClientCert tls.Certificate
	// RequireClientCert makes the server refuse clients without a
	// certificate signed by the CA (tls-auth-clients yes); default true.
	RequireClientCert bool
}

// NewTLS creates a fresh CA (ECDSA P-256, valid for one hour), a server
// certificate for 127.0.0.1 and localhost, and a client certificate, in
// t.TempDir(), and picks a free TLS port.
func NewTLS(t testing.TB) *TLS {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert, caDER := newCert(t, nil, nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "leasehold test CA"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	srvKey, _, srvDER := newCert(t, caKey, caCert, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	cliKey, _, cliDER := newCert(t, caKey, caCert, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "leasehold test client"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	x := &TLS{
		CAFile:            filepath.Join(dir, "ca.crt"),
		CertFile:          filepath.Join(dir, "redis.crt"),
		KeyFile:           filepath.Join(dir, "redis.key"),
		CAs:               x509.NewCertPool(),
		RequireClientCert: true,
	}
	x.CAs.AddCert(caCert)
	writePEM(t, x.CAFile, "CERTIFICATE", caDER)
	writePEM(t, x.CertFile, "CERTIFICATE", srvDER)
	writePEM(t, x.KeyFile, "EC PRIVATE KEY", ecKeyDER(t, srvKey))
	cliPair, err := tls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cliDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecKeyDER(t, cliKey)}),
	)
	if err != nil {
		t.Fatalf("testkit: client key pair: %v", err)
	}
	x.ClientCert = cliPair
	if x.Port, err = freePort(); err != nil {
		t.Fatalf("testkit: free TLS port: %v", err)
	}
	return x
}

// Option returns the redis-server configuration for TLS on x.Port.
func (x *TLS) Option() RedisOption {
	auth := "no"
	if x.RequireClientCert {
		auth = "yes"
	}
	return WithRedisConfig(
		"tls-port "+strconv.Itoa(x.Port),
		"tls-cert-file "+x.CertFile,
		"tls-key-file "+x.KeyFile,
		"tls-ca-cert-file "+x.CAFile,
		"tls-auth-clients "+auth,
	)
}

// Addr returns the TLS address, 127.0.0.1:Port.
func (x *TLS) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(x.Port)) }

// ClientConfig returns a client TLS configuration that trusts only the test
// CA and presents the client certificate.
func (x *TLS) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		RootCAs:      x.CAs,
		ServerName:   "127.0.0.1",
		Certificates: []tls.Certificate{x.ClientCert},
	}
}

// ClientOptions returns go-redis options for the TLS port with short
// timeouts and no retries.
func (x *TLS) ClientOptions() *redis.Options {
	return &redis.Options{
		Addr:         x.Addr(),
		TLSConfig:    x.ClientConfig(),
		DialTimeout:  time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		MaxRetries:   -1,
	}
}

func newCert(t testing.TB, parentKey *ecdsa.PrivateKey, parent, tmpl *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testkit: generate key: %v", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("testkit: serial: %v", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Minute)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatalf("testkit: create certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testkit: parse certificate: %v", err)
	}
	return key, cert, der
}

func ecKeyDER(t testing.TB, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatalf("testkit: marshal key: %v", err)
	}
	return der
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("testkit: write %s: %v", path, err)
	}
}
