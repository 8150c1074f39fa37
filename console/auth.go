package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sessions: a successful sign-in (POST api/login with the token, or the
// user and password) gets a random session ID in an HttpOnly, SameSite=Strict
// cookie, and a CSRF token, random too, that the page sends back in the
// X-CSRF-Token header of every action (a synchronizer token bound to the
// session, kept in memory only). A restart signs everyone out.
const (
	sessionCookie = "leasehold_console"
	csrfHeader    = "X-CSRF-Token"
	sessionTTL    = 8 * time.Hour
	maxSessions   = 1000
)

type session struct {
	user    string
	csrf    string
	expires time.Time
}

type sessions struct {
	auth Auth
	mu   sync.Mutex
	m    map[string]*session // by session ID
}

func newSessions(a Auth) *sessions { return &sessions{auth: a, m: make(map[string]*session)} }

// equal compares secrets in constant time, whatever their lengths.
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// verify checks credentials and returns who they name.
func (s *sessions) verify(token, user, password string) (string, bool) {
	a := s.auth
	switch {
	case a.Token != "":
		return "token", token != "" && equal(token, a.Token)
	case a.User != "":
		okU, okP := equal(user, a.User), equal(password, a.Password)
		return user, okU && okP
	}
	return "", false
}

// credentials reads a login request: JSON {"token"} or {"user",
// "password"}, or an Authorization header (Bearer or Basic).
func credentials(r *http.Request) (token, user, password string) {
	if u, p, ok := r.BasicAuth(); ok {
		return "", u, p
	}
	if h := r.Header.Get("Authorization"); len(h) > 7 && h[:7] == "Bearer " {
		return h[7:], "", ""
	}
	var body struct {
		Token    string `json:"token"`
		User     string `json:"user"`
		Password string `json:"password"`
	}
	_ = json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&body)
	return body.Token, body.User, body.Password
}

func (s *sessions) create(user string) (id string, sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for k, v := range s.m {
		if now.After(v.expires) {
			delete(s.m, k)
		}
	}
	if len(s.m) >= maxSessions { // drop one: the map's order is as good as any
		for k := range s.m {
			delete(s.m, k)
			break
		}
	}
	id = rand.Text()
	sess = &session{user: user, csrf: rand.Text(), expires: now.Add(sessionTTL)}
	s.m[id] = sess
	return id, sess
}

// get returns the live session of r's cookie, and its ID.
func (s *sessions) get(r *http.Request) (string, *session) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[ck.Value]
	if !ok {
		return "", nil
	}
	if time.Now().After(sess.expires) {
		delete(s.m, ck.Value)
		return "", nil
	}
	return ck.Value, sess
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// setSessionCookie sets (maxAge > 0) or drops the session cookie. It is
// Secure when the request came over TLS, or always with Config.SecureCookie
// (behind a TLS-terminating proxy, which the console cannot tell from a
// client claiming one: over plain HTTP on a loopback or private port a
// Secure cookie would never come back).
func (c *Console) setSessionCookie(w http.ResponseWriter, r *http.Request, id string, maxAge int) {
	secure := r.TLS != nil || c.cfg.SecureCookie
	if !secure && maxAge > 0 && strings.HasPrefix(r.Header.Get("Origin"), "https://") {
		c.warnInsecureCookie.Do(func() {
			c.log.Warn("console: a sign-in from an https page reached the console over plain HTTP (a TLS-terminating proxy?): " +
				"its session cookie is not Secure; set --secure-cookie (env LEASEHOLD_UI_SECURE_COOKIE, or Config.SecureCookie)")
		})
	}
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: Secure over TLS or with Config.SecureCookie (see above)
		Name: sessionCookie, Value: id, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: secure, SameSite: http.SameSiteStrictMode,
	})
}

// sameOrigin refuses a request whose Origin (or, without one, Referer)
// names another host than the one it was sent to.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		o = r.Header.Get("Referer")
	}
	if o == "" {
		return true // not a browser's cross-site request: those carry Origin on POST
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (c *Console) serveSession(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Actions    bool   `json:"actions"`
		Auth       string `json:"auth,omitempty"` // "token" or "basic"
		SignedIn   bool   `json:"signed_in"`
		User       string `json:"user,omitempty"`
		CSRF       string `json:"csrf,omitempty"`
		CanRetry   bool   `json:"can_retry"`
		Jaeger     bool   `json:"jaeger"`
		PollMS     int64  `json:"poll_ms"`
		Standalone bool   `json:"standalone"`
		DLQ        string `json:"dlq"`
		Group      string `json:"group"`
	}{Actions: c.cfg.Actions, Auth: c.cfg.Auth.kind(), CanRetry: c.cfg.Compensations != nil, Jaeger: c.cfg.JaegerURL != "",
		PollMS: c.cfg.PollInterval.Milliseconds(), Standalone: c.cfg.Worker == nil, DLQ: c.cfg.DLQ, Group: c.cfg.Group}
	if c.cfg.Actions {
		if _, s := c.auth.get(r); s != nil {
			out.SignedIn, out.User, out.CSRF = true, s.user, s.csrf
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Console) serveLogin(w http.ResponseWriter, r *http.Request) {
	if !c.cfg.Actions {
		c.fail(w, http.StatusForbidden, "actions are off: this console is read-only (start it with --actions, or Config.Actions)", nil)
		return
	}
	if !sameOrigin(r) {
		c.fail(w, http.StatusForbidden, "cross-origin sign-in refused", nil)
		return
	}
	if ok, wait := c.throttle.take(r.RemoteAddr, time.Now()); !ok {
		secs := max(1, int(math.Ceil(wait.Seconds())))
		c.log.Warn("console sign-in throttled", "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		c.fail(w, http.StatusTooManyRequests, fmt.Sprintf("too many sign-in attempts: try again in %d s", secs), nil)
		return
	}
	user, ok := c.auth.verify(credentials(r))
	if !ok {
		c.log.Warn("console sign-in refused", "remote", r.RemoteAddr)
		time.Sleep(300 * time.Millisecond) // slows guessing down
		c.fail(w, http.StatusUnauthorized, "wrong credentials", nil)
		return
	}
	id, s := c.auth.create(user)
	c.setSessionCookie(w, r, id, int(sessionTTL.Seconds()))
	c.log.Info("console sign-in", "user", user, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]string{"user": s.user, "csrf": s.csrf})
}

func (c *Console) serveLogout(w http.ResponseWriter, r *http.Request) {
	if id, s := c.auth.get(r); s != nil {
		if !equal(r.Header.Get(csrfHeader), s.csrf) {
			c.fail(w, http.StatusForbidden, "missing or wrong CSRF token", nil)
			return
		}
		c.auth.drop(id)
	}
	c.setSessionCookie(w, r, "", -1)
	writeJSON(w, http.StatusOK, map[string]string{})
}
