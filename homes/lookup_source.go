package homes

// LookupSource is Lookup that also says where the home came from (heard here
// or told by a peer), for the request path's lookup metrics. Same cost as
// Lookup: O(1), no allocation, one shard read lock.
func (t *Table) LookupSource(tenant string) (region int, src Source, ok bool) {
	s := t.shardFor(tenant)
	s.mu.RLock()
	e, ok := s.m[tenant]
	s.mu.RUnlock()
	if !ok {
		return -1, 0, false
	}
	return int(e.region), e.src, true
}
