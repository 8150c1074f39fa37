package cli

import (
	"net"
	"strconv"
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
