// Package daemon is the loop of `govn northd`: it connects to the
// Northbound and the Southbound, feeds their changes to the northd state
// machine through an incremental-processing engine, and writes what the
// state machine yields back to the databases. Package northd computes;
// this package does the I/O and decides when.
//
// # The loop
//
// Both clients report every committed transaction of their database
// (client.Options.OnChange); the reports are queued, coalesced per row, and
// the loop wakes. Each iteration
//
//  1. takes the queue and marks the engine's input nodes (one per table,
//     "NB_logical_switch", "SB_port_binding"...) of the tables that changed;
//  2. runs the engine: the node "northd" hands each table's changes to
//     northd.State.Apply and then runs State.Process (handled, so the
//     counters show "compute"), or, on the first run and after
//     inc-engine/recompute, State.Recompute;
//  3. when active, builds one Southbound transaction with State.WriteSB,
//     asserting the lock, and commits it. Only one Southbound transaction
//     is ever in flight, and the client applies the updates of a
//     transaction before its reply, so its own changes are already queued
//     when Commit returns and step 1 of the next iteration applies them
//     before the next WriteSB. A failed commit makes State.Resync compare
//     everything in the next transaction, after a backoff;
//  4. when active, writes the Northbound (State.WriteNB: sb_cfg, hv_cfg,
//     Logical_Switch_Port.up) in one transaction. sb_cfg takes the nb_cfg
//     of the Southbound transaction that has just committed (handed to
//     State.Committed), so ovn-nbctl --wait=sb waits for one Southbound
//     commit and one Northbound update, not for the next iteration to
//     apply the Southbound's echo of that commit first.
//
// After a reconnection the clients resume their monitors
// (monitor_cond_since) or report the difference to what they held, so the
// engine sees ordinary changes and no full recompute is needed.
//
// # Active and standby
//
// Like ovn-northd, the daemon asks for the Southbound lock "ovn_northd" and
// writes only while it holds it; without it, it is standby and its queue
// only coalesces (it holds at most one entry per row). Paused, it gives the
// lock up and writes nothing until resumed.
package daemon
