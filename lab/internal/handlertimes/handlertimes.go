// Package handlertimes carries the workload handler's entry and exit times (Unix ns: the lab's
// workload and load generator share one host and so one clock) from the workload to the load
// generator in a response header, so the generator can split its latency into the way in (its
// start to the handler's entry: connection, socket, the server's netpoll and scheduling) and the
// way out (the handler's exit to its own read of the response).
package handlertimes

import (
	"strconv"
	"strings"
	"time"
)

// Header is the response header the workload sets on /work.
const Header = "X-Cfsim-Handler-Unix-Ns"

// Format is the header's value: "entry exit" in Unix ns.
func Format(entry, exit time.Time) string {
	return strconv.FormatInt(entry.UnixNano(), 10) + " " + strconv.FormatInt(exit.UnixNano(), 10)
}

// Parse reads a Format value; ok is false without one (another server, or a workload built
// before the header existed) or for a malformed one.
func Parse(h string) (entry, exit int64, ok bool) {
	a, b, found := strings.Cut(h, " ")
	if !found {
		return 0, 0, false
	}
	entry, err1 := strconv.ParseInt(a, 10, 64)
	exit, err2 := strconv.ParseInt(b, 10, 64)
	return entry, exit, err1 == nil && err2 == nil && exit >= entry
}
