package providertest

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"one", []string{"one"}},
		{"one two", []string{"one ", "two"}},
		{"  lead  gap\ttab\n", []string{"  lead  ", "gap\t", "tab\n"}},
		{"   ", []string{"   "}},
		{`{"n":5}`, []string{`{"n":5}`}},
		{"héllo wörld", []string{"héllo ", "wörld"}},
	}
	for _, tt := range tests {
		got := splitWords(tt.in)
		if !slices.Equal(got, tt.want) {
			t.Errorf("splitWords(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Join(got, "") != tt.in {
			t.Errorf("splitWords(%q) does not join back", tt.in)
		}
	}
}
