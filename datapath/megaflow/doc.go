// Package megaflow is the datapath's flow cache: megaflows (a masked key and
// the datapath actions for every packet matching it), found by tuple-space
// search over subtables of equal mask, ranked by hits so the busiest
// subtable is probed first, with an exact-match cache (EMC) in front.
//
// A Cache belongs to one receive goroutine and is not safe for concurrent
// use, so the fast path takes no locks. Misses go to the slow path
// (xlate.Translator) and the result is installed with Insert.
//
// # Staleness
//
// Every megaflow remembers the flow-table generation it was translated at
// and the tables (and whether groups) its translation used. When the tables
// change (the caller sees a new generation), Revalidate keeps the megaflows
// whose tables did not change (given classifier.Tables.ChangedSince) and
// re-translates the others' masked keys: such a megaflow survives only if
// the new translation gives the same actions and examines no bit outside
// the megaflow's mask (then every packet it matches would translate the
// same way); otherwise it is deleted. Until Revalidate has run for a
// generation, Lookup reports megaflows of older generations as misses, so no
// stale megaflow is ever used. Idle megaflows are removed by Expire.
//
// # Recirculation states
//
// A megaflow whose actions recirculate holds the translator's frozen states
// they name (xlate.Recircs) from Insert until it is deleted (by Remove,
// Revalidate, Expire or Flush, or replaced by Insert), so the translator can
// free states no megaflow refers to. A cache dropped without Flush keeps its
// states alive: flush a cache you discard.
//
// A megaflow whose translation ran learn actions installs the learned rules
// on Insert; Expire refreshes them while the megaflow is hit and has the
// translator drop learned rules that idled out.
//
// # Flow limit
//
// Caches given one Limit (SetLimit) count their megaflows in it together;
// at its cap Insert installs nothing and returns nil (counted as
// LimitHits), so the caller forwards its packet uncached. Each install
// and removal costs one atomic add; lookups do not touch the Limit.
// Lowering the cap removes nothing by itself: the owner evicts the excess
// with Evict, least recently hit first (AppendUsed gives the times to
// choose a threshold across caches).
//
// # Rule and table statistics
//
// A hit only counts the megaflow's own Hits (and the caller its Bytes);
// the fast path never touches a rule. Each megaflow keeps the packet
// counters its translation passed through (xlate.Result.Counters: every
// rule it ran, every table it missed), shared between megaflows with the
// same list, and the packets and bytes it counted since the last push are
// credited to them, with atomic adds, by PushStats, Expire, and
// Revalidate; a megaflow that is removed pushes its final count first.
// Whoever installs a megaflow credits the packet of the upcall itself. A
// megaflow that revalidation keeps with a new translation pushes its
// count to the old rules and credits the new ones after. So a rule's
// count is exact after a push and lags by at most one sweep before.
package megaflow
