package routing

// ListenerAttachedRoutes counts, per listener name, the accepted routes
// attached to it: the Gateway's status.listeners[].attachedRoutes.
func ListenerAttachedRoutes(fragments []*Fragment) map[string]int32 {
	out := map[string]int32{}
	for _, f := range fragments {
		if f == nil {
			continue
		}
		for _, l := range f.Listeners {
			out[l.Name]++
		}
	}
	return out
}
