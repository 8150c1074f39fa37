package cli

import (
	"context"
	"net"
	"strconv"
	"strings"
)

// checkBrokers refuses a seed broker list that is not host:port,... with
// a port from 1 to 65535: a usage error, not a dial failure later.
func checkBrokers(flagName string, brokers []string) error {
	for _, b := range brokers {
		host, port, err := net.SplitHostPort(b)
		if err == nil && host == "" {
			err = errNoHost
		}
		if err == nil {
			err = checkPort(port, 1)
		}
		if err != nil {
			return usagef("%s %q: %v; want host:port, comma-separated", flagName, b, err)
		}
	}
	return nil
}

// checkListen refuses a listen address that is not [host]:port with a port
// from 0 (any free port) to 65535.
func checkListen(flagName, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		err = checkPort(port, 0)
	}
	if err != nil {
		return usagef("%s %q: %v; want [host]:port", flagName, addr, err)
	}
	return nil
}

type addrError string

func (e addrError) Error() string { return string(e) }

const (
	errNoHost  = addrError("no host")
	errBadPort = addrError("the port is not a number from 1 to 65535")
)

func checkPort(port string, lowest int) error {
	p, err := strconv.Atoi(port)
	if err != nil || p < lowest || p > 65535 {
		return errBadPort
	}
	return nil
}

// dialMap maps a broker address, as the brokers advertise it, to the
// address to dial instead (--kafka-dial-map).
type dialMap map[string]string

// parseDialMap reads "advertised=dial,..." (host:port each side).
func parseDialMap(s string) (dialMap, error) {
	m := dialMap{}
	for _, pair := range splitList(s) {
		from, to, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, usagef("--kafka-dial-map %q: want advertised=dial pairs, comma-separated", pair)
		}
		for _, a := range []string{from, to} {
			if err := checkBrokers("--kafka-dial-map", []string{strings.TrimSpace(a)}); err != nil {
				return nil, err
			}
		}
		m[strings.TrimSpace(from)] = strings.TrimSpace(to)
	}
	return m, nil
}

// dial is a kgo.Dialer: it dials the mapped address of addr, or addr.
func (m dialMap) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if to, ok := m[addr]; ok {
		addr = to
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
