package console

import (
	"math"
	"net"
	"sync"
	"time"
)

// Sign-in throttling: every sign-in attempt takes a token from its client
// address's bucket and from one bucket shared by all addresses; an attempt
// that finds either empty is answered 429 with Retry-After, before the
// credentials are looked at. Guessing is so bounded per address and overall,
// whatever the number of parallel requests.
const (
	// signInBurst sign-in attempts from one address go through at once,
	// then one every signInEvery.
	signInBurst = 5
	signInEvery = 5 * time.Second
	// globalBurst attempts from all addresses together go through at once,
	// then one every globalEvery.
	globalBurst = 20
	globalEvery = time.Second
	// maxThrottled bounds the addresses remembered; past it, addresses
	// whose bucket is full again are forgotten first, then any.
	maxThrottled = 10_000
)

// bucket is a token bucket: tokens accrue one every `every`, up to burst.
type bucket struct {
	tokens float64
	last   time.Time
}

// take takes a token at now, or says how long until one is there.
func (b *bucket) take(now time.Time, burst int, every time.Duration) (bool, time.Duration) {
	b.refill(now, burst, every)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) * float64(every))
}

func (b *bucket) refill(now time.Time, burst int, every time.Duration) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = math.Min(float64(burst), b.tokens+float64(el)/float64(every))
		b.last = now
	}
}

type throttle struct {
	mu     sync.Mutex
	global bucket
	addrs  map[string]*bucket
}

func newThrottle() *throttle {
	return &throttle{global: bucket{tokens: globalBurst, last: time.Now()}, addrs: map[string]*bucket{}}
}

// take takes one attempt for the client at remote (host:port) at now; when
// refused, it says when to try again.
func (t *throttle) take(remote string, now time.Time) (bool, time.Duration) {
	host := clientKey(remote)
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.addrs[host]
	if !ok {
		t.makeRoom(now)
		b = &bucket{tokens: signInBurst, last: now}
		t.addrs[host] = b
	}
	if ok, wait := b.take(now, signInBurst, signInEvery); !ok {
		return false, wait
	}
	if ok, wait := t.global.take(now, globalBurst, globalEvery); !ok {
		b.tokens++ // not this address's fault: give its token back
		return false, wait
	}
	return true, 0
}

// makeRoom forgets addresses when the map is full: those whose bucket has
// filled up again (they lose nothing), else any one.
func (t *throttle) makeRoom(now time.Time) {
	if len(t.addrs) < maxThrottled {
		return
	}
	for k, b := range t.addrs {
		if b.refill(now, signInBurst, signInEvery); b.tokens >= signInBurst {
			delete(t.addrs, k)
		}
	}
	for k := range t.addrs {
		if len(t.addrs) < maxThrottled {
			break
		}
		delete(t.addrs, k)
	}
}

// clientKey names the client of a request from its remote address: the IP,
// or for IPv6 its /64, which one subscriber usually holds whole.
func clientKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
