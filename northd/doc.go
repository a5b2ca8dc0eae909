// Package northd compiles the OVN Northbound database into the Southbound:
// logical datapaths and ports with their tunnel keys, logical flows in the
// pipelines of ovn-northd(8), and the other Southbound tables ovn-northd
// writes. It is the state machine of `govn northd`; the daemon around it
// (cmd/govn) does the I/O.
//
// # Owners and dependencies
//
// Every Southbound output belongs to one owner: a Northbound row (a switch,
// a switch port, an ACL, a load balancer...) or a singleton for global
// output. An owner's generator (one function per kind, see ownerKinds)
// reads the databases only through gen, which records each read as a
// dependency: a row's columns, one list column (gen.Members), the rows that
// refer to a row (which switch lists this port), the rows of a name, the
// rows of a table, a memo's value. List columns are the few that list a
// row's members (a switch's ports, ACLs and load balancers, a router's
// ports, NATs, routes and policies, a port group's ports and ACLs, a load
// balancer group's members, isMembership): reading a row does not depend
// on them, so a new port does not regenerate everything that reads its
// switch; every other column, references included, is part of the row. State.Apply turns each database change into the
// dependencies it invalidates (rowDB.apply) and marks their owners stale;
// State.Process generates the stale owners again and diffs their output
// against what they produced before. So a change costs work in proportion to
// the owners that read what changed, and there is no separate hand-written
// change handler to get wrong: the full compute (State.Recompute) runs the
// very same generators over every owner.
//
// A generator must read nothing but through gen and must be deterministic:
// the same inputs give the same output. It must not change what it read:
// a typed model's maps and slices (Read) may be shared with other readers,
// as a memo's value is. Two generators must not depend on
// each other's output; what several need (the switch a port is on) each
// reads from the Northbound.
//
// # Logical flows
//
// A logical flow is identified by its content (stage, priority, match,
// actions, controller meter, stage hint). The flow table holds each content
// once with the set of datapaths it applies to; a flow on one datapath is a
// Southbound row with logical_datapath, on several a row with a
// Logical_DP_Group, and a group row is shared by all flows on the same set
// (groups already in the Southbound are reused). An owner remembers the
// flows it contributed; the table counts contributions per (flow,
// datapath), which costs nothing more than the datapath set itself, and
// there is no per-owner reference list on the flow. Once the flow's
// Southbound row is back, the entry holds the row's strings, so that the
// flow's text is in memory once. A flow can also be put
// on a whole set of datapaths (a dpSet: the switches of a load balancer
// group), computed like a memo: the set's members change without
// regenerating the owners of its flows, and an owner holds one
// contribution per flow, not one per datapath. A Southbound row keeps
// its UUID for as long as its content exists, so transactions carry only
// real changes.
//
// # Southbound writes
//
// Other Southbound rows are records: the columns northd manages in a row
// named by a key that stays the same for as long as the row stands for the
// same thing (Port_Binding by logical_port, Datapath_Binding by the
// Northbound row). Columns that chassis write (Port_Binding.chassis, up) are
// not northd's and are left alone. References between records are written
// as placeholders (gen.Ref) and resolved at write time. State.WriteSB adds
// to a transaction the operations for everything that changed; after a
// restart (or a failed transaction) everything is compared once and only
// real differences are written. Tunnel keys found in the Southbound are
// kept.
//
// # On every core
//
// A large batch of stale owners (a full compute) is generated on every
// core with the very result of generating it owner by owner: generators
// run speculatively, changing nothing, and their logs are committed in the
// batch's order, an owner whose reads changed meanwhile generated again
// (parallel.go; Options.Workers); an owner whose log is what it already
// has (a full recompute of what did not change) is left as it is, so a
// recompute that changes nothing costs the generation and a comparison. A generator must therefore put the
// tunnel keys it claims nowhere but in its records. WriteSB likewise checks
// a full compute's flows against the Southbound on every core.
package northd
