// Package dp is govn's userspace switch: it moves frames between ports
// (package port) through the flow tables, the way the Open vSwitch
// userspace datapath does, and knows nothing of OVN.
//
// # The fast path
//
// Each port has one receive goroutine (a worker). A worker takes a batch
// of frames from its port and, for each frame:
//
//  1. finishes a partial checksum left by transmit offload (a GSO frame
//     keeps it: the kernel needs it to split the frame on output);
//  2. builds the flow key: in_port, the tunnel fields of a frame that came
//     out of a tunnel, and the headers (packet.Extract);
//  3. looks the key up in its own cache (package megaflow: an exact-match
//     cache in front of megaflows grouped by mask);
//  4. on a miss, makes an upcall: the slow path (SlowPath; Pipeline is flow
//     tables plus package xlate) translates the key into datapath actions
//     and the mask of every bit it examined, and the worker installs that
//     megaflow;
//  5. executes the actions: outputs are queued per port and sent in one
//     batch at the end; header rewrites fix IP and L4 checksums
//     incrementally; ct() calls the connection tracker and fills the key's
//     ct_* fields, and recirc() runs the packet through the cache again
//     with recirc_id set; userspace() copies it to the packet-in channel.
//
// Packets of a batch that hit megaflows stop at their megaflow's first
// ct(); the packets stopped at the same action then go to the tracker
// together (ConntrackBatcher, conntrack.Tracker.ProcessBatch, which
// overlaps their memory misses) and go on with the rest of their actions;
// recirculated packets that hit stop again, so each round is batched.
// Upcalls run ct() packet by packet, as does a tracker without a batch
// method. See ctbatch.go for the reordering this allows (the same as OVS).
//
// IP fragments reaching ct() are reassembled per zone first (package
// ipfrag), and the datagram is refragmented on output to the size of the
// largest fragment received, as the kernel datapath of OVS does; see
// frag.go.
//
// meter() drops packets above a token-bucket rate; flows with the same
// rate and burst share a meter (meter.go).
//
// Caches are per worker, so the fast path takes no locks and allocates
// nothing (TestFastPathAllocs). A worker holds its own mutex while it
// processes a batch; dumps and counters take it to read the cache.
//
// # The controller's packets
//
// userspace() hands the controller a PacketIn with what an OpenFlow
// packet-in carries: the frame, the key with the pipeline's metadata and
// registers where the action ran (the megaflow's action keeps them: they
// follow from the bits the megaflow matches), the table, and for a paused
// action the continuation. Execute is the packet-out: it runs a frame
// the controller built from a table lookup or from given actions, with
// given registers, through one more worker that has no port (packet-outs
// are serialized on it); PacketIn.Resume makes the packet-out that
// continues a paused pipeline.
//
// # Staleness and expiry
//
// Every megaflow records the flow-table generation it was translated at.
// Before each batch a worker compares its cache with the tables' current
// generation and, if they changed, revalidates: each megaflow is
// re-translated and kept only if its actions and mask still hold. A
// translation that raced with a change is used for its packet but not
// installed. So no packet is forwarded by a megaflow older than the tables
// it saw. Megaflows idle for Config.IdleTimeout are removed; Run sweeps
// quiet workers' caches and ages conntrack entries on a timer.
//
// # Flow limit
//
// The megaflows of all workers together are capped (Config.FlowLimit,
// default 200,000 as Open vSwitch's other_config:flow-limit): at the cap an
// upcall executes its packet's actions without installing a megaflow and
// counts it (Stats.FlowLimitHits), so a flood of misses to new addresses
// costs slow-path work but no memory beyond the cap. SetFlowLimit changes
// the cap at run time and evicts the excess, least recently hit megaflows
// of any worker first; Run re-checks on every tick. The fast path does not
// look at the limit; an install reserves its place with one atomic add.
//
// # Rule statistics
//
// Rules count packets the way Open vSwitch's do, off the fast path: an
// upcall credits its packet to the rules its translation ran, and every
// megaflow keeps those rules' counters and credits them, in bulk, with the
// packets that hit it since the last push. Pushes happen on the sweeps
// that already run (expiry, revalidation, removal, which pushes the last
// count) and on PushStats, which dumps call. A packet whose megaflow is
// hit costs nothing more than the megaflow's own counts.
//
// # Offloads
//
// Ports that take offload metadata (AF_PACKET, TAP) get GSO frames whole;
// for a port that cannot (Geneve, the channel port), the worker splits
// them in software and finishes checksums before sending.
package dp
