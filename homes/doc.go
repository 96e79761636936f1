// Package homes owns the routing state an entry shares with its peers: the home table (which
// region is each tenant's home) and the region failure marks.
//
// Every observation carries a Version, a hybrid logical clock stamped by the entry that made
// it, so entries converge on the same table whatever order they hear things in: an older
// observation never replaces a newer one, and applying the same one twice changes nothing.
//
// The request path calls Lookup, Learn, Marked, Mark and Clear on every request. They take no
// global lock (homes are spread over 64 shards, marks are atomics) and, when nothing changes,
// allocate nothing. What this entry observes itself (a new or moved home, a new mark, a clear)
// goes out on the change feed (Changes); what peers observed comes back through Apply and
// ApplyMark, and Range and Marks give the whole state to a joining peer. Restore puts back
// what a state file kept of an earlier run, and Generation tells its writer whether anything
// changed since.
//
// homes knows nothing of HTTP, routers or gossip: it parses no header, validates no tenant
// name, decodes no event and talks to no peer. The proxy and gossip packages do that, and meet
// only here. homes starts no goroutine and does no I/O, so a Table needs no Close.
package homes
