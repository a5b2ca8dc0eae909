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
// Why no mmap ring: TPACKET_V3 rings cannot carry the virtio-net header, and
// without it partial checksums and GSO are lost. recvmmsg/sendmmsg batches
// of up to BatchSize frames cost one system call per batch, which is what
// the ring would save, and keep the offload metadata.
package port
