// Package validate owns the checks a home or a mark from a peer must pass before it reaches
// the table: a sane tenant name, a configured region, an observer and a version not absurdly
// in the future (Validator), and the bound on a node name every part of gossip applies
// (MaxNodeName).
//
// It must not know where what it checks came from (a serf event, a direct packet, a snapshot
// or a repair pull) nor anything of the table beyond the regions it configures: it says yes
// or no, and its callers count and drop.
package validate
