package handlertimes

import (
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	a := time.Unix(1700000000, 0)
	entry, exit, ok := Parse(Format(a, a.Add(400*time.Microsecond)))
	if !ok || entry != a.UnixNano() || exit-entry != 400000 {
		t.Fatalf("got %d %d %v", entry, exit, ok)
	}
	for _, bad := range []string{"", "12", "a b", "5 4", "1 2 3"} {
		if _, _, ok := Parse(bad); ok {
			t.Errorf("%q: accepted", bad)
		}
	}
}
