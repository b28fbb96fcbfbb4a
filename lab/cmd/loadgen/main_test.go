package main

import "testing"

func TestHandlerTimes(t *testing.T) {
	entry, exit, ok := handlerTimes("1700000000000000000 1700000000000400000")
	if !ok || entry != 1700000000000000000 || exit-entry != 400000 {
		t.Fatalf("got %d %d %v", entry, exit, ok)
	}
	for _, bad := range []string{"", "12", "a b", "5 4", "1 2 3"} {
		if _, _, ok := handlerTimes(bad); ok {
			t.Errorf("%q: accepted", bad)
		}
	}
}
