package port

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// recvTimeout bounds how long Recv sleeps in the kernel before checking
// whether the port was closed.
const recvTimeout = 100 * time.Millisecond

// sendTimeout bounds how long Send waits for room in the socket buffer
// before dropping a batch, so a stuck device cannot stall the switch.
const sendTimeout = 100 * time.Millisecond

// AFPacket is a port on a Linux network device through an AF_PACKET socket.
// It receives every frame the device receives (promiscuous), not the frames
// the host sends through it, and carries offload metadata both ways.
type AFPacket struct {
	name    string
	ifindex int
	file    *os.File
	raw     syscall.RawConn

	rx mmsgBatch // used only by the Recv goroutine

	txMu sync.Mutex // held by Send; Close takes it to unmap the ring
	tx   mmsgBatch
	txr  *txRing // nil: send with sendmmsg only
	// txGrown is set once the port tried to grow its transmit ring: a
	// ring grows once, to its full size, or never.
	txGrown bool
	// gso sends the GSO frames. It does not bypass the qdisc layer, which
	// splits a frame in software when the device lacks the offload (a
	// veth with checksum offload off, say): a socket with
	// PACKET_QDISC_BYPASS drops such a frame instead.
	gso    *os.File
	gsoRaw syscall.RawConn

	ring        *rxRing    // nil: receive with recvmmsg
	rxGrown     bool       // the port tried to grow its receive ring (Recv only)
	ringMu      sync.Mutex // held while reading the ring; Close unmaps it
	kernelDrops atomic.Uint64
	closed      atomic.Bool
	counters
}

// mmsghdr is struct mmsghdr; Go's alignment rules give it the C layout.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// mmsgBatch is the scratch of one recvmmsg or sendmmsg call: per message a
// virtio-net header and a data buffer.
type mmsgBatch struct {
	msgs  []mmsghdr
	iovs  [][2]unix.Iovec
	vnets [][vnetHdrLen]byte
	cmsgs [][auxCmsgSpace]byte // receive only: PACKET_AUXDATA
}

// auxCmsgSpace fits one control message carrying struct tpacket_auxdata.
const auxCmsgSpace = 64

func newMmsgBatch(n int) mmsgBatch {
	b := mmsgBatch{
		msgs:  make([]mmsghdr, n),
		iovs:  make([][2]unix.Iovec, n),
		vnets: make([][vnetHdrLen]byte, n),
	}
	for i := range b.msgs {
		b.iovs[i][0].Base = &b.vnets[i][0]
		b.iovs[i][0].SetLen(vnetHdrLen)
		b.msgs[i].hdr.Iov = &b.iovs[i][0]
		b.msgs[i].hdr.SetIovlen(2)
	}
	return b
}

func newRxBatch(n int) mmsgBatch {
	b := newMmsgBatch(n)
	b.cmsgs = make([][auxCmsgSpace]byte, n)
	return b
}

// setData points message i's data buffer at b.
func (m *mmsgBatch) setData(i int, b []byte) {
	if len(b) == 0 {
		m.iovs[i][1].Base = nil
	} else {
		m.iovs[i][1].Base = &b[0]
	}
	m.iovs[i][1].SetLen(len(b))
	m.msgs[i].hdr.Flags = 0
	m.msgs[i].n = 0
	if m.cmsgs != nil {
		m.msgs[i].hdr.Control = &m.cmsgs[i][0]
		m.msgs[i].hdr.SetControllen(auxCmsgSpace)
	}
}

// vlanFromAux returns the VLAN tag the kernel took off a received frame
// (veth and most NICs strip it into the socket buffer's metadata), from a
// PACKET_AUXDATA control message.
func vlanFromAux(b []byte) (tpid, tci uint16, ok bool) {
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(b) {
			return 0, 0, false
		}
		if h.Level == unix.SOL_PACKET && h.Type == unix.PACKET_AUXDATA && l >= unix.SizeofCmsghdr+int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&b[unix.SizeofCmsghdr]))
			if aux.Status&unix.TP_STATUS_VLAN_VALID == 0 {
				return 0, 0, false
			}
			tpid = etherTypeVLAN
			if aux.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 && aux.Vlan_tpid != 0 {
				tpid = aux.Vlan_tpid
			}
			return tpid, aux.Vlan_tci, true
		}
		l = (l + 7) &^ 7
		if l >= len(b) {
			break
		}
		b = b[l:]
	}
	return 0, 0, false
}

// NewAFPacket opens an AF_PACKET port on the device called name, which
// must exist; it is set up and promiscuous for as long as the port is open.
func NewAFPacket(name string) (*AFPacket, error) { return newAFPacket(name, true) }

// newAFPacket opens the port, with receive and transmit rings if ring is
// set and the kernel allows them, else with recvmmsg and sendmmsg.
func newAFPacket(name string, ring bool) (*AFPacket, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("af_packet port %s: %w", name, err)
	}
	s, err := prepareSockets(ring)
	if err != nil {
		return nil, fmt.Errorf("af_packet port %s: %w", name, err)
	}
	return s.attach(name, ifi.Index)
}

// afSockets are the parts of an AF_PACKET port that do not depend on its
// device: the receive socket with its options and ring, and the transmit
// ring's socket, neither bound yet. Setting up a ring waits for an RCU
// grace period in the kernel (packet_set_ring calls synchronize_net):
// milliseconds on an idle machine, up to a hundred on a busy one, twice
// per port. Binding a prepared socket does not wait (the socket was never
// hooked to a device), so AFPacketOpener prepares them ahead of time.
type afSockets struct {
	fd  int
	rr  *rxRing // nil: receive with recvmmsg
	txr *txRing // nil: send with sendmmsg; its socket is not bound yet
}

// prepareSockets makes the sockets of a port, with rings if ring is set
// and the kernel allows them.
func prepareSockets(ring bool) (*afSockets, error) {
	// Protocol 0 until bind, so no frame of another device slips in.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	fail := func(what string, err error) (*afSockets, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	opts := []struct {
		level, opt, val int
		what            string
	}{
		{unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1, "PACKET_VNET_HDR"},
		{unix.SOL_PACKET, unix.PACKET_AUXDATA, 1, "PACKET_AUXDATA"},
		{unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING"},
		{unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS"},
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.val); err != nil {
			return fail(o.what, err)
		}
	}
	// Big buffers absorb bursts while the switch goroutine is descheduled;
	// the Force variants need CAP_NET_ADMIN, so fall back quietly.
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], 8<<20) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], 8<<20)
		}
	}
	// The socket blocks, with a timeout so Recv notices Close. A receive
	// goroutine sleeping in recvmmsg is woken by the kernel directly; going
	// through the runtime's poller costs two more context switches per
	// wake-up, which dominated the cost per packet under load.
	tv := unix.NsecToTimeval(recvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail("SO_RCVTIMEO", err)
	}
	tv = unix.NsecToTimeval(sendTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return fail("SO_SNDTIMEO", err)
	}
	s := &afSockets{fd: fd}
	if ring {
		s.rr, _ = setupRxRing(fd, rxRingFrames) // without a ring, recvmmsg does the job
		s.txr, _ = prepareTxRing(txFrames)      // without a ring, sendmmsg does the job
	}
	return s, nil
}

// close releases sockets that were not attached.
func (s *afSockets) close() {
	if s.rr != nil {
		s.rr.close()
	}
	if s.txr != nil {
		s.txr.close()
	}
	unix.Close(s.fd)
}

// attach binds the sockets to device ifindex, called name, and makes the
// port; on failure the sockets are closed.
func (s *afSockets) attach(name string, ifindex int) (*AFPacket, error) {
	fail := func(what string, err error) (*AFPacket, error) {
		s.close()
		return nil, fmt.Errorf("af_packet port %s: %s: %w", name, what, err)
	}
	sll := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}
	if err := unix.Bind(s.fd, sll); err != nil {
		return fail("bind", err)
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(s.fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return fail("promiscuous mode", err)
	}
	if err := setLinkUp(name); err != nil {
		return fail("link up", err)
	}
	if s.txr != nil {
		if err := s.txr.bind(ifindex); err != nil {
			s.txr.close() // sendmmsg does the job
			s.txr = nil
		}
	}
	gso, gsoRaw, err := gsoSocket(ifindex)
	if err != nil {
		return fail("gso", err)
	}
	f := os.NewFile(uintptr(s.fd), "af_packet:"+name)
	raw, err := f.SyscallConn()
	if err != nil {
		gso.Close()
		return fail("raw conn", err)
	}
	return &AFPacket{
		name: name, ifindex: ifindex, file: f, raw: raw,
		rx: newRxBatch(BatchSize), tx: newMmsgBatch(BatchSize), ring: s.rr, txr: s.txr,
		gso: gso, gsoRaw: gsoRaw,
	}, nil
}

// gsoSocket opens the socket for GSO frames on device ifindex: one that
// receives nothing and goes through the qdisc layer.
func gsoSocket(ifindex int) (*os.File, syscall.RawConn, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("gso socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("gso socket: PACKET_VNET_HDR: %w", err)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
	}
	tv := unix.NsecToTimeval(sendTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("gso socket: SO_SNDTIMEO: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("gso socket: bind: %w", err)
	}
	f := os.NewFile(uintptr(fd), "af_packet-gso")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("gso socket: %w", err)
	}
	return f, raw, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Name implements Port.
func (a *AFPacket) Name() string { return a.name }

// Offloads implements Port: the kernel finishes checksums and splits GSO
// segments of frames sent with a virtio-net header.
func (a *AFPacket) Offloads() bool { return true }

// Recv implements Port.
func (a *AFPacket) Recv(pkts []*Packet) (int, error) {
	n := min(len(pkts), len(a.rx.msgs))
	if n == 0 {
		return 0, nil
	}
	if a.ring != nil {
		return a.recvRing(pkts[:n])
	}
	for i := range n {
		pkts[i].Reset()
		a.rx.setData(i, pkts[i].space())
	}
	got, err := recvmmsg(a.raw, a.rx.msgs[:n], &a.closed, func(e unix.Errno) bool { return e == unix.ENETDOWN })
	if err == ErrClosed {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("af_packet port %s: recvmmsg: %w", a.name, err)
	}
	// Keep the good frames at the front of pkts.
	k := 0
	for i := range got {
		p := pkts[i]
		if !a.takeMsg(i, p) {
			continue
		}
		if k != i {
			pkts[k], pkts[i] = pkts[i], pkts[k]
		}
		k++
	}
	a.rxPackets.Add(uint64(k))
	a.rxBatches.Add(1)
	return k, nil
}

// takeMsg fills p from received message i: the frame, its offload
// metadata and the VLAN tag the kernel took off. It reports false for a
// frame to drop.
func (a *AFPacket) takeMsg(i int, p *Packet) bool {
	m := &a.rx.msgs[i]
	size := int(m.n) - vnetHdrLen
	if m.hdr.Flags&unix.MSG_TRUNC != 0 || size < 14 {
		a.rxDropped.Add(1)
		return false
	}
	p.setLen(size)
	p.Offload = decodeVnetHdr(a.rx.vnets[i][:])
	if cl := int(m.hdr.Controllen); cl > 0 {
		if tpid, tci, ok := vlanFromAux(a.rx.cmsgs[i][:min(cl, auxCmsgSpace)]); ok {
			p.PushVLAN(tpid, tci)
		}
	}
	a.rxBytes.Add(uint64(len(p.Data)))
	return true
}

// Send implements Port.
func (a *AFPacket) Send(pkts []*Packet) error {
	a.txMu.Lock()
	defer a.txMu.Unlock()
	if a.closed.Load() {
		return ErrClosed
	}
	if a.txr != nil {
		return a.sendRing(pkts)
	}
	// Runs of plain frames and runs of GSO frames, each on its socket.
	for len(pkts) > 0 {
		gso := pkts[0].Offload.IsGSO()
		n := 1
		for n < len(pkts) && pkts[n].Offload.IsGSO() == gso {
			n++
		}
		if err := a.sendMsgs(a.socketFor(pkts[0]), pkts[:n]); err != nil {
			return err
		}
		pkts = pkts[n:]
	}
	return nil
}

// socketFor returns the socket that sends p.
func (a *AFPacket) socketFor(p *Packet) syscall.RawConn {
	if p.Offload.IsGSO() {
		return a.gsoRaw
	}
	return a.raw
}

// sendRing is Send through the transmit ring: frames are written into
// slots and one send(2) hands them all to the kernel. A GSO frame, or one
// too big for a slot, goes with sendmmsg, after the frames before it.
// A slot the kernel still holds after a flush drops the frame, as a full
// NIC ring would.
func (a *AFPacket) sendRing(pkts []*Packet) error {
	r := a.txr
	queued := 0
	for i, p := range pkts {
		if p.Offload.IsGSO() || !r.fits(p) {
			_ = a.flushRing(&queued)
			if err := a.sendMsgs(a.socketFor(p), pkts[i:i+1]); err != nil {
				return err
			}
			continue
		}
		if !r.put(p) {
			_ = a.flushRing(&queued)
			if !r.put(p) && (a.txGrown || !a.growTxRing()) {
				a.txDropped.Add(1)
				continue
			}
			if r != a.txr {
				// A bigger ring, all of it free.
				r = a.txr
				r.put(p)
			}
		}
		queued++
		a.txBytes.Add(uint64(len(p.Data)))
	}
	return a.flushRing(&queued)
}

// flushRing sends the queued slots and counts them. A refusal (the device
// is down, say) is counted, not returned: the slots stay marked and go
// when the device takes them, or the frames behind them are dropped.
func (a *AFPacket) flushRing(queued *int) error {
	if *queued == 0 {
		return nil
	}
	if err := a.txr.flush(); err != nil {
		a.txErrors.Add(1)
	}
	a.txPackets.Add(uint64(*queued))
	a.txBatches.Add(1)
	*queued = 0
	return nil
}

// sendMsgs is Send with sendmmsg on socket raw.
func (a *AFPacket) sendMsgs(raw syscall.RawConn, pkts []*Packet) error {
	for len(pkts) > 0 {
		n := min(len(pkts), len(a.tx.msgs))
		for i := range n {
			encodeVnetHdr(a.tx.vnets[i][:], pkts[i].Offload)
			a.tx.setData(i, pkts[i].Data)
		}
		sent, err := sendmmsg(raw, a.tx.msgs[:n])
		if err != nil && !errors.Is(err, errTxStuck) {
			err = fmt.Errorf("af_packet port %s: sendmmsg: %w", a.name, err)
		}
		switch {
		case a.closed.Load():
			return ErrClosed
		case errors.Is(err, errTxStuck):
			a.txDropped.Add(uint64(n))
			pkts = pkts[n:]
			continue
		case err != nil:
			// The first frame was refused (too big, bad offload): skip it.
			a.txErrors.Add(1)
			a.txDropped.Add(1)
			sent = 1
		}
		for _, p := range pkts[:sent] {
			a.txBytes.Add(uint64(len(p.Data)))
		}
		if err == nil {
			a.txPackets.Add(uint64(sent))
			a.txBatches.Add(1)
		}
		pkts = pkts[sent:]
	}
	return nil
}

// errTxStuck reports a socket that could not take a batch for
// sendTimeout: the batch is dropped, as a full NIC ring drops.
var errTxStuck = errors.New("transmit queue full")

// Stats implements Port; RxDropped includes the frames the kernel dropped
// because the socket buffer was full.
func (a *AFPacket) Stats() Stats {
	s := a.snapshot()
	a.collectKernelDrops()
	s.RxDropped += a.kernelDrops.Load()
	return s
}

// collectKernelDrops adds the frames the kernel dropped since the last
// call (ring or socket buffer full) to kernelDrops.
func (a *AFPacket) collectKernelDrops() {
	_ = a.raw.Control(func(fd uintptr) {
		if st, err := unix.GetsockoptTpacketStats(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
			// PACKET_STATISTICS resets on read; keep a running total.
			a.kernelDrops.Add(uint64(st.Drops))
		}
	})
}

// Close implements Port. The kernel's drop count is collected first, so
// Stats after Close still include it.
func (a *AFPacket) Close() error {
	a.collectKernelDrops()
	a.ringMu.Lock()
	a.closed.Store(true)
	if a.ring != nil {
		a.ring.close()
	}
	a.ringMu.Unlock()
	a.txMu.Lock()
	if a.txr != nil {
		a.txr.close()
	}
	a.gso.Close()
	a.txMu.Unlock()
	return a.file.Close()
}

// setLinkUp sets the IFF_UP flag of a device.
func setLinkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	if ifr.Uint16()&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
