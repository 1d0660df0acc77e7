package auth

import (
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// Route is what the guard needs to know of a request's route: its
// pattern, the dialect its errors take, and whether it is exempt.
type Route struct {
	Pattern string
	Dialect httpapi.Dialect
	// Exempt routes tell nothing and change nothing (probes, the API
	// document): they answer whatever the Host.
	Exempt bool
}

// Guard refuses, while local mode holds, what only a web page would send.
// Local mode (no token exists) trusts the machine, not the network or
// the browser: every request acts as the local admin, so a web page the
// local user visits must not be able to act through it. Guard refuses
//   - a Host that is not an IP literal, "localhost", a name under
//     ".localhost" or the host of Config.Addr (DNS rebinding: a page on an
//     attacker's name that resolves to 127.0.0.1 sends its own Host);
//   - a cross-origin browser request with an unsafe method (Sec-Fetch-Site,
//     else Origin against Host: http.CrossOriginProtection);
//   - a POST whose body is not declared JSON: the content types a page may
//     send without a CORS preflight (text/plain, form encodings) are then
//     never read, even from a browser that sends no Origin.
//
// The browser page is same-origin and every SDK sends no Origin, so both
// keep working. With tokens none of this applies: a browser does not
// attach a bearer token by itself.
func (a *Auth) Guard(next http.Handler, route func(*http.Request) Route) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// When the token look-up fails, its last answer within OutageTTL
		// decides, as it does for who the request may act as
		// (RequireCached): a scraper that reaches /metrics by name keeps
		// doing so with tokens. Without one it guards: failing closed
		// costs a foreign request nothing it was owed.
		local, err := a.LocalMode(r.Context())
		if err != nil {
			var known bool
			if local, known = a.lastLocalMode(); !known {
				local = true
			}
		}
		if !local {
			next.ServeHTTP(w, r)
			return
		}
		rt := route(r)
		if rt.Exempt {
			next.ServeHTTP(w, r)
			return
		}
		var p *httpapi.Problem
		switch {
		case !a.localHost(r.Host):
			p = forbidden("local mode answers only requests addressed to localhost or an IP address; create a token (promptkit tokens create) to serve other names")
		case cop.Check(r) != nil:
			p = forbidden("local mode refuses cross-origin browser requests; create a token (promptkit tokens create) to call the API from another origin")
		case !jsonBodyOK(r, rt.Pattern):
			p = &httpapi.Problem{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
				Message: "the request body must be JSON, sent with Content-Type: application/json"}
		default:
			next.ServeHTTP(w, r)
			return
		}
		rt.Dialect.Write(w, p)
	})
}

func forbidden(msg string) *httpapi.Problem {
	return &httpapi.Problem{Status: http.StatusForbidden, Code: "forbidden", Message: msg}
}

// localHost reports whether a Host header names this machine in a way a
// DNS rebinding page cannot: an IP literal, a loopback name, or the name
// the server was told to listen on.
func (a *Auth) localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	listen, _, err := net.SplitHostPort(a.cfg.Addr)
	return err == nil && listen != "" && strings.EqualFold(listen, host)
}

// jsonBodyOK reports whether a POST's body, if it has one, is declared
// JSON. Bodyless requests (cancel, retry) pass, and POST /v1/files,
// whose body is multipart, is its own handler's to check: a cross-site
// form can send multipart, but not past the origin check.
func jsonBodyOK(r *http.Request, pattern string) bool {
	if r.Method != http.MethodPost || pattern == "POST /v1/files" {
		return true
	}
	if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
		return true
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
