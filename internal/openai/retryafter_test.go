package openai

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	received := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	future := received.Add(90 * time.Second)
	past := received.Add(-time.Hour)
	tests := []struct {
		in     string
		want   time.Time
		wantOK bool
	}{
		{"0", received, true},
		{"  5 ", received.Add(5 * time.Second), true},
		{"120", received.Add(120 * time.Second), true},
		{"-1", time.Time{}, false},
		{"+1", time.Time{}, false},
		{"1.5", time.Time{}, false},
		{"abc", time.Time{}, false},
		{"", time.Time{}, false},
		{"   ", time.Time{}, false},
		{"5 6", time.Time{}, false},
		{future.Format(http.TimeFormat), future, true},                  // IMF-fixdate
		{future.Format("Monday, 02-Jan-06 15:04:05 GMT"), future, true}, // RFC 850,
		{future.Format(time.ANSIC), future, true},                       // ANSI C asctime,
		{past.Format(http.TimeFormat), received, true},
		{"Sun, 06 Nov 1994 08:49:37 GMT", received, true},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.in, received)
		if ok != tt.wantOK || !got.Equal(tt.want) {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestParseRetryAfterSaturates(t *testing.T) {
	received := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, in := range []string{"99999999999999999999", "9223372036854775807", "9223372037"} {
		got, ok := ParseRetryAfter(in, received)
		if !ok {
			t.Fatalf("%s: ok=false", in)
		}
		// At least ~290 years ahead, i.e. no wrap into the past.
		if got.Before(received.AddDate(290, 0, 0)) {
			t.Errorf("%s: notBefore %v not far in the future", in, got)
		}
	}
	// Near the end of representable time the result still never precedes
	// received.
	late := maxTime.Add(-time.Hour)
	if got, ok := ParseRetryAfter("99999999999999999999", late); !ok || got.Before(late) {
		t.Errorf("late received: %v, %v", got, ok)
	}
}
