// Package northdbench measures govn northd against the real ovn-northd on
// an ovn-kubernetes-like Northbound. It backs "govn bench northd".
//
// The cluster (Shape.Northbound) is "density-heavy": per node a switch
// with a management port and 30 pods (addresses and port security "MAC
// IP", requested-chassis), a gateway router with a join port, an external
// switch with a localnet port, SNAT and routes, and a port on the cluster
// router with a gateway chassis; services as load balancers with two VIPs
// and 2 to 10 backends, all in one load balancer group on every node
// switch and gateway router; per namespace a network policy as a port
// group with ACLs over the namespace's address set. It is built in one
// transaction.
//
// Each subject — govn northd on govn db, ovn-northd on ovsdb-server, and
// optionally govn northd on ovsdb-server, which shows the databases' share
// — gets its own Northbound and Southbound; Config.NoOVN (govn bench
// northd --no-ovn) leaves ovn-northd out, for clusters it would take
// minutes on. The northd processes start one
// after the other, and everything after that alternates between them, so
// that a shared machine's drifts hit all alike. The figures:
//
//   - cold start: from starting the northd until NB_Global.sb_cfg reaches
//     nb_cfg, which a northd writes once the Southbound transaction for
//     that Northbound has committed;
//   - full recompute: from inc-engine/recompute until the northd has used
//     no CPU for 500 ms (the last busy moment, from /proc schedstat), and
//     its CPU time meanwhile; govn northd also reports its engine run;
//   - change latency: 20 of each change (pod add, pod delete, load
//     balancer backend add, network policy add, node add and node
//     delete), each one ovn-nbctl --wait=sb command run by a persistent
//     ovn-nbctl daemon, p50 and p90; the bench hands the command to the
//     daemon's control socket as an ovn-nbctl client would, but without
//     exec'ing one (6 ms here before the client even connects, the same
//     for both subjects and no part of NB commit to SB commit); for govn
//     northd also the
//     time from the Northbound update's arrival to the Southbound commit's
//     reply (its northd/last-write); between changes the northd is left
//     to go idle, and its CPU time per change is taken too (robust on a
//     busy machine). The engine counters (inc-engine/show-stats) before and
//     after each kind name the kinds that fell back to a full recompute;
//   - Logical_Flow and Logical_DP_Group rows, the Southbound file after
//     compaction (in each server's own format), and the northd's peak RSS
//     (VmHWM) and CPU time at the end, and its database servers'; the
//     northd's peak RSS once the cold start is done, and its RSS (VmRSS)
//     at the end.
//
// # ovn-nbctl's commands
//
// A pod is added and deleted with generic database commands ("--id=@p
// create Logical_Switch_Port name=... addresses=... port_security=...
// options:requested-chassis=..." then "add Logical_Switch SW ports @p";
// "remove Logical_Switch SW ports UUID", with the UUID the create
// printed), not with lsp-add, lsp-set-* and lsp-del. The Northbound ends
// up the same: the port's row is identical column for column (checked
// with "ovn-nbctl list" on the real ovn-nbctl 23.03) and on the same
// switch, and a port removed from its switch's ports is deleted by the
// server, the port being a non-root row. But ovn-nbctl's lsp-* commands
// first build a name-to-row cache over every switch and router and their
// ports, which costs time in proportion to the Northbound, in ovn-nbctl
// and not in any northd: measured through a persistent ovn-nbctl daemon
// on the N = 250 Northbound (8,751 ports) on ovsdb-server, no northd
// running, the pod add took 25.7 ms p50 as lsp-add and lsp-set-* and
// 12.2 ms as create and add (a no-op "get NB_Global . nb_cfg" took
// 6.5 ms), and the pod delete 31.2 ms as lsp-del and 8.6 ms as remove.
// Both subjects get the very same commands, so the comparison stays fair
// and the change latency shows the northds' and databases' time rather
// than ovn-nbctl's. The other kinds keep the lsp-, lrp- and lr- commands:
// they are what ovn-kubernetes' own tooling would type, and a node add's
// latency is dominated by the northd.
package northdbench
