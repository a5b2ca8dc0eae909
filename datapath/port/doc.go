// Package port moves Ethernet frames between the datapath and the outside
// world.
//
// A Port is a source and sink of frames in batches: Recv fills a slice of
// reusable Packets and blocks until at least one frame arrives; Send writes a
// batch. The switch runs one goroutine per port calling Recv, and any
// goroutine may call Send.
//
// Kinds of port:
//
//   - AFPacket: an AF_PACKET socket bound to a Linux device (a veth end or a
//     NIC). Frames move in batches with recvmmsg/sendmmsg.
//   - TAP (and Internal, a TAP standing for the bridge itself): a
//     /dev/net/tun device whose other side is the host's own stack.
//   - Geneve: tunnel frames carried in UDP datagrams on an ordinary socket;
//     the outer header becomes Packet.Tunnel and back.
//   - Channel: an in-memory port for tests that cannot be root.
//
// # Offloads: partial checksums and GSO
//
// A veth end transmits TCP and UDP with the checksum left partial
// (CHECKSUM_PARTIAL: the L4 checksum field holds only the pseudo-header sum)
// and, with TSO on, TCP segments of up to 64 KiB. A raw packet socket that
// ignored this would forward packets with bad checksums, which a receiving
// stack or a connection tracker drops. AFPacket and TAP therefore read and
// write a virtio-net header with every frame (PACKET_VNET_HDR, IFF_VNET_HDR)
// and keep it in Packet.Offload. The switch completes a partial checksum
// (Packet.FinishChecksum) before looking at the payload or sending to a port
// without offload support, and splits a large TCP segment in software
// (Packet.SegmentTCP) only when the output port cannot take it whole. Nobody
// has to turn offloads off.
//
// # Receiving: a TPACKET_V2 ring
//
// AFPacket receives through a TPACKET_V2 ring mapped from the kernel (V3
// cannot carry the virtio-net header): the kernel writes each frame into
// the next slot as it arrives, and the receive goroutine copies batches out
// of shared memory, sleeping in poll(2) only when the ring is empty. Frames
// larger than a slot (GSO segments) are also queued on the socket
// (PACKET_COPY_THRESH) and read whole with recvmmsg. On the bench this took
// 64-byte forwarding from about 150 to 190 Kpps. Without a ring (if the
// kernel refuses one) frames come in batches of up to BatchSize through
// recvmmsg. Sending is batched with sendmmsg. The socket blocks in the
// kernel rather than in the Go poller: a wake-up through the poller costs
// two more context switches, which dominated the cost per packet.
//
// # Where the time per packet goes
//
// On the bench (64-byte UDP between two namespaces, 2 cores) the switch
// spends about 2.5 us of CPU per packet, and perf puts 4% of it in the
// switch's own code (Go and its runtime): the rest is the kernel, mostly
// sendmmsg, and about half of that is the receiving host's IP/UDP stack
// (waking its reader included), which the kernel runs inside the
// sender's call.
// Measured A/B and not kept, because none moved packets/s or CPU per
// packet beyond the noise: batches of 64 or 128 instead of 32, receive
// rings of 4096 or 16384 slots, GOMAXPROCS 4 or 8 (fewer P hand-offs
// around blocking calls). A TX ring (PACKET_TX_RING) would save only the
// per-message copy-in of sendmmsg, about 6% of the switch's samples; the
// skb, the veth transmit and the receiver's stack stay per packet. What
// is lost between offered and received is dropped at this port's receive
// ring while the switch waits for a CPU (see Stats.RxDropped).
package port
