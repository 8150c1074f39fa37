package console

import (
	"net"
	"net/http"
	"strings"
)

// Host check: a browser sends the name it was told in the Host header, so a
// page of another site whose name was made to resolve to the console's
// address (DNS rebinding) is recognised by its Host, and refused before any
// handler reads Redis. The names a loopback address goes by are always
// allowed: no other site can make a browser send them.

// loopbackNames are the Host names that only a browser on the machine itself
// sends.
var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

// hostSet is the parsed Config.AllowedHosts.
type hostSet struct {
	any   bool                // "*": no check
	names map[string]struct{} // lower-case host names, any port
	pairs map[string]struct{} // lower-case host:port
}

func newHostSet(allowed []string) hostSet {
	s := hostSet{names: map[string]struct{}{}, pairs: map[string]struct{}{}}
	for _, n := range loopbackNames {
		s.names[n] = struct{}{}
	}
	for _, a := range allowed {
		a = strings.ToLower(strings.TrimSpace(a))
		switch a {
		case "":
		case "*":
			s.any = true
		default:
			if h, p, err := net.SplitHostPort(a); err == nil {
				s.pairs[net.JoinHostPort(h, p)] = struct{}{}
			} else {
				s.names[strings.Trim(a, "[]")] = struct{}{}
			}
		}
	}
	return s
}

// allows reports whether a request with this Host header may be answered.
func (s hostSet) allows(host string) bool {
	if s.any {
		return true
	}
	host = strings.ToLower(host)
	name := host
	if h, p, err := net.SplitHostPort(host); err == nil {
		name = h
		if _, ok := s.pairs[net.JoinHostPort(h, p)]; ok {
			return true
		}
	}
	_, ok := s.names[strings.TrimSuffix(strings.Trim(name, "[]"), ".")]
	return ok
}

// misdirected answers a request whose Host is not allowed.
func (c *Console) misdirected(w http.ResponseWriter, r *http.Request) {
	c.log.Warn("console: request for a host not allowed refused", "host", r.Host, "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusMisdirectedRequest)
	//nolint:gosec // G705: plain text under nosniff, the Host's control characters replaced and its length cut
	_, _ = w.Write([]byte("This console does not answer for host " + quoteHost(r.Host) +
		": if that is its name, add it to --allowed-hosts (env LEASEHOLD_UI_ALLOWED_HOSTS, or Config.AllowedHosts).\n"))
}

// quoteHost shows a Host header safely in a plain-text answer.
func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100] + "..."
	}
	return "\"" + strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, h) + "\""
}
