// Package ovsdbbench measures OVSDB servers side by side on this machine:
// govn db against the real ovsdb-server, or any two servers given as
// [Target]s. It backs "govn bench ovsdb".
//
// Both servers run at once, each on its own temporary database with a small
// test schema, and every measurement is taken on one and then on the other,
// in several rounds (3 by default, the median kept), so that slow drifts of
// a shared machine hit both alike. The figures are:
//
//   - single-row insert transactions per second, from 1 client and from 16
//     clients each sending its next transaction when the previous is
//     answered, 4000 transactions from one client and 16000 from 16 (so
//     that both servers end up with the same rows, which makes their memory
//     comparable), in two modes:
//     "default" (plain transactions) and "durable" (each ends with
//     {"op":"commit","durable":true});
//   - fan-out latency: the time from sending a commit until all of 200
//     monitoring clients have its update, p50 and p99 over 300 commits made
//     one after another (spread over the rounds), and the median time
//     until the first of them has it. The writer's reply is awaited after
//     the timing, not in it. A monitor has the update when its socket
//     becomes readable with it: one goroutine waits in epoll
//     (edge-triggered) for all 200 sockets, notes when each becomes
//     readable, and reads and checks them only once all are (a socket
//     woken by an inactivity probe or part of a message is waited for
//     again). 200 real monitors are 200 processes, each reading its own
//     socket; one reader reading 200 sockets in turn would add its own
//     serial reads (a few microseconds each here) to the figure, and 200
//     goroutines with a JSON-RPC client each would compete with the
//     server for the same CPUs;
//   - the server's CPU time (all threads, from /proc/PID/task/*/schedstat)
//     per fan-out commit and per insert transaction from N clients: its
//     own cost, which load from elsewhere disturbs less than latency;
//   - the time to serve an initial monitor (monitor_cond) of a 100k-row
//     table to a new connection, until the whole reply has been received;
//   - the server's memory: peak and final resident set size (VmHWM and
//     VmRSS from /proc/PID/status) at the end.
//
// The clients do the same work against either server, so the differences
// are the servers'. The inserting clients, like the monitors, are driven by
// one goroutine waiting in epoll (one write and one read per transaction):
// a goroutine and a full JSON-RPC client per connection cost about as much
// CPU per transaction as ovsdb-server does, on the same CPUs.
// The two servers do not promise the same durability in default mode: govn
// db replies after its log is fsynced, ovsdb-server (standalone) after it
// has written the log without fsync unless a transaction asks for
// "durable". Durable mode is the like-for-like comparison; default mode
// shows what a client of each sees. Both servers notify monitors without
// waiting for the disk.
//
// # Clusters
//
// [RunCluster] ("govn bench ovsdb --cluster") compares 3-server clusters
// instead: govn db's (govn db create-cluster, join-cluster) and
// ovsdb-server's (ovsdb-tool create-cluster, join-cluster), both with the
// default election timer of 1000 ms, on loopback. [StartCluster] runs
// one, and is what ovsdb/difftest's cluster tests use too. Inserts go to
// the leader from 1 and from 16 clients (throughput, commit latency
// p50/p99, the CPU time of all three members per transaction); fan-out
// commits go to the leader and 200 monitors watch the followers; then the
// leader is killed with SIGKILL five times (restarted each time) while a
// client writes through every member, timing how long until another
// member accepts a write, and at the end every member must hold every
// transaction that was acknowledged. In a cluster both servers reply only
// once a transaction is on a majority's disk.
package ovsdbbench
