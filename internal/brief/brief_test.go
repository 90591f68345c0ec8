package brief

import (
	"slices"
	"testing"
)

func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"plain", 10, "plain"},
		{"  two\n\tlines  ", 20, "two lines"},
		{"abcdef", 4, "abc…"},
		{"ééééé", 3, "éé…"},
		{"", 3, ""},
	} {
		if got := OneLine(c.in, c.n); got != c.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestFirstN(t *testing.T) {
	s := []string{"a", "b", "c", "d"}
	if got := FirstN(s, 4); !slices.Equal(got, s) {
		t.Errorf("FirstN(s, 4) = %q", got)
	}
	if got := FirstN(s, 2); !slices.Equal(got, []string{"a", "b", "and 2 more"}) {
		t.Errorf("FirstN(s, 2) = %q", got)
	}
	if len(s) != 4 || s[2] != "c" {
		t.Errorf("FirstN changed its argument: %q", s)
	}
}
