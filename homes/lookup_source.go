package homes

// LookupSource is Lookup that also says where the home came from (heard here
// or told by a peer), for the request path's lookup metrics. Same cost as
// Lookup: O(1), no allocation, one shard read lock.
func (t *Table) LookupSource(tenant string) (region int, src Source, ok bool) {
	s, tag := t.locate(tenant)
	s.mu.RLock()
	idx, ok := s.x.find(&t.ring, tag, tenant)
	if ok {
		sl := t.ring.at(idx)
		region, src = int(sl.region), sl.src
	}
	s.mu.RUnlock()
	if !ok {
		return -1, 0, false
	}
	return region, src, true
}
