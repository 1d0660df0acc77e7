package openai

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxTime is the largest representable time.Time; 62135596800 is the
// offset between year 1 and the Unix epoch in seconds.
var maxTime = time.Unix(math.MaxInt64-62135596800, 999999999).UTC()

// ParseRetryAfter parses a Retry-After header value received at received:
// either delta-seconds (unsigned decimal digits only) or an HTTP date. Empty,
// negative, fractional or malformed values give ok=false. A past date gives
// (received, true): no extra wait. Huge delta-seconds saturate instead of
// wrapping, so ok always implies !notBefore.Before(received).
func ParseRetryAfter(value string, received time.Time) (notBefore time.Time, ok bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return time.Time{}, false
	}
	if isDigits(v) {
		d := time.Duration(math.MaxInt64)
		// Any failure here is ErrRange since v is all digits: saturate.
		if secs, err := strconv.ParseUint(v, 10, 64); err == nil && secs <= uint64(math.MaxInt64/int64(time.Second)) {
			d = time.Duration(secs) * time.Second
		}
		nb := received.Add(d)
		if nb.Before(received) { // only near the end of representable time
			nb = maxTime
		}
		return nb, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return time.Time{}, false
	}
	if t.Before(received) {
		return received, true
	}
	return t, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
