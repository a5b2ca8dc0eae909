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
//     NIC). Frames move in batches through mmap rings (or recvmmsg/sendmmsg).
//   - TAP (and Internal, a TAP standing for the bridge itself): a
//     /dev/net/tun device whose other side is the host's own stack.
//   - UDPTunnel: tunnel frames carried in UDP datagrams on an ordinary
//     socket, with Geneve (options included) or VXLAN (a 24-bit VNI only)
//     as its Encap; the outer header becomes Packet.Tunnel and back.
//     Datagrams move in batches with recvmmsg and sendmmsg. Package packet
//     parses and builds the tunnel headers, for this port and for
//     DecapFrame alike.
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
// (Packet.Segment) only when the output port cannot take it whole. Nobody
// has to turn offloads off. AFPacket sends GSO frames on a socket of their
// own that goes through the qdisc layer, which splits them in software
// for a device without the offload (a bypassing socket drops them).
//
// # Offloads through a tunnel
//
// UDPTunnel takes offloads too, as a NIC with tunnel segmentation does: a
// partial checksum is finished in the packet, and a GSO frame is split
// into segments of its own GSOSize (the VM's MSS survives the tunnel),
// each behind its own tunnel header, all of one size but the last, and
// handed to the kernel in one message with UDP_SEGMENT: up to 64
// datagrams per system call, which a TAP with USO (the underlay bridge's
// internal port) and a veth carry whole. On receipt, UDP_GRO hands the
// port such runs whole, and the port joins the consecutive TCP segments
// of one flow through one tunnel back into one GSO frame (coalesce.go)
// for the VM's port, so the receiving side too moves about one frame per
// 64 KiB instead of one per segment.
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
// recvmmsg. The socket blocks in the kernel rather than in the Go poller:
// a wake-up through the poller costs two more context switches, which
// dominated the cost per packet.
//
// # Opening: sockets made ahead
//
// Setting up a ring waits for an RCU grace period in the kernel
// (packet_set_ring calls synchronize_net), twice per port: about 10 ms
// each on an idle machine, up to 80 ms on a loaded one, where it was most
// of a new VM's time to ovn-installed on a chassis under a flood of ARP
// misses. Binding a socket that was never bound does not wait, so
// AFPacketOpener keeps one port's sockets, rings included, made ahead in
// the background, and Open only binds them to the device.
//
// # Sending: a TPACKET_V2 transmit ring
//
// Send writes a batch into the slots of a transmit ring (on a second
// socket that receives nothing), each frame behind its virtio-net header,
// and hands them all to the kernel with one send(2) that does not wait.
// That saves sendmmsg's per-frame copying-in of message headers and
// iovecs: on the bench, CPU per 64-byte packet went from 2.67 to 2.30 us.
// Frames bigger than a slot (GSO segments) go with sendmmsg after the
// frames before them; a slot the kernel still holds drops the frame, as a
// full NIC ring does, so a stuck device cannot stall the switch.
//
// # Ring sizes: small until busy
//
// A ring is resident whole from the moment it is set up (the kernel
// allocates its pages then), and a hypervisor has hundreds of VIFs, most
// of them idle. So a port starts with 128 slots in each ring (512 KiB,
// where 1024 each took 4 MiB: about 100 MiB for a chassis of 26 ports,
// see TestAFPacketResidentPerPort), and a ring grows once to 1024 slots
// when it shows bulk traffic: the receive ring when Recv finds the slot
// half a ring ahead already filled, the transmit ring when the kernel
// still holds the next slot after a flush. Growing a receive ring frees
// it first (the kernel replaces none), so the frames it held are lost,
// once; a transmit ring grows on a new socket.
//
// # Tunnels: one port, two encapsulations
//
// UDPTunnel is written once for Geneve and VXLAN: the Encap picks the
// header, which package packet parses (ParseGeneve, ParseVXLAN) and builds
// (AppendGeneveHeader, AppendVXLANHeader) for the port and for
// DecapFrame alike. A received datagram lands whole in its packet's
// buffer and the header is pulled off; the outer source comes from the
// datagram's address, the outer destination, TOS and TTL from control
// messages (IP_PKTINFO, IP_RECVTOS, IP_RECVTTL). A sent frame is gathered
// from the header, built in the port's own scratch, and the packet's frame,
// so Send leaves the packet as it was. recvmmsg and sendmmsg move up to a
// batch per call on a blocking socket, as AFPacket's fallback does. On
// the bench (a batch of 32 small Geneve frames over loopback, sent and
// received) that took CPU per frame from 5.7-9.7 to 4.1-5.1 us; the rest
// is the kernel's UDP path, per datagram whatever the port does. The
// outer source port is the port's own, not a hash of the inner flow, so
// ECMP in the underlay sees one flow per pair of chassis.
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
// around blocking calls). The skb, the veth transmit and the receiver's
// stack stay per packet whatever the switch does. What is lost between
// offered and received is dropped at this port's receive ring while the
// switch waits for a CPU (see Stats.RxDropped).
package port
