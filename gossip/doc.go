// Package gossip shares what entries learn (tenant homes, region failures and their clears)
// with every other entry, all over one address, memberlist's (--gossip-bind): membership, marks
// and clears as hashicorp/serf user events; homes in direct packets from the entry that learned
// them to every member, on memberlist's UDP port (direct.go); the whole table for a joining
// entry and periodic anti-entropy repair as authenticated HTTP exchanges on memberlist's TCP
// port (internal/mux, internal/tablesync). Everything sealed follows serf's keyring
// (internal/keyring), so `serf keys` rotates it. One type, Gossip, owns it all: serf (started again
// if it shuts itself down), the joiner, bootstrap, repair and the tags.
//
// It meets the request path only through package homes: it reads the table's change feed and
// applies what peers send with homes.Apply and homes.ApplyMark. It knows nothing of HTTP
// requests to routers.
package gossip
