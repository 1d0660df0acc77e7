package server

import (
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/promptkit/promptkit/internal/openaiapi"
)

// Local mode (no token exists) trusts the machine, not the network or the
// browser: every request acts as the local admin, so a web page the local
// user visits must not be able to act through it. While local mode holds,
// guardLocal refuses
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
func (s *Server) guardLocal(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An error of the token look-up guards too: failing closed costs a
		// foreign request nothing it was owed.
		if local, err := s.LocalMode(r.Context()); !local && err == nil {
			next.ServeHTTP(w, r)
			return
		}
		_, pattern := s.mux.Handler(r)
		if exemptFromGuard[pattern] {
			next.ServeHTTP(w, r)
			return
		}
		var status int
		var msg string
		switch {
		case !s.localHost(r.Host):
			status, msg = http.StatusForbidden, "local mode answers only requests addressed to localhost or an IP address; create a token (promptkit tokens create) to serve other names"
		case cop.Check(r) != nil:
			status, msg = http.StatusForbidden, "local mode refuses cross-origin browser requests; create a token (promptkit tokens create) to call the API from another origin"
		case !jsonBodyOK(r, pattern):
			status, msg = http.StatusUnsupportedMediaType, "the request body must be JSON, sent with Content-Type: application/json"
		default:
			next.ServeHTTP(w, r)
			return
		}
		switch {
		case s.oaPatterns[pattern] && status == http.StatusForbidden:
			oaError(w, status, openaiapi.TypeInvalidRequest, "", "forbidden", msg)
		case s.oaPatterns[pattern]:
			oaError(w, status, openaiapi.TypeInvalidRequest, "", "unsupported_media_type", msg)
		case status == http.StatusForbidden:
			writeError(w, http.StatusForbidden, "forbidden", msg)
		default:
			writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", msg)
		}
	})
}

// exemptFromGuard are the routes that tell nothing and change nothing:
// probes and the API document answer whatever the Host.
var exemptFromGuard = map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /openapi.json": true}

// localHost reports whether a Host header names this machine in a way a
// DNS rebinding page cannot: an IP literal, a loopback name, or the name
// the server was told to listen on.
func (s *Server) localHost(hostport string) bool {
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
	listen, _, err := net.SplitHostPort(s.cfg.Addr)
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
