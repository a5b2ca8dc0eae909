package port

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// txRing is a TPACKET_V2 transmit ring, on a socket of its own (protocol
// 0: it receives nothing). Send writes a batch of frames into slots, each
// behind its virtio-net header, and one send(2) hands them all to the
// kernel: no message headers or iovecs to copy in per frame, as sendmmsg
// does. The kernel gives a slot back when the frame's buffer is freed,
// which for a veth is when the peer's stack takes it.
type txRing struct {
	fd     int
	mem    []byte
	frames int
	next   int
}

// Transmit ring geometry: slots as big as the receive ring's. A port
// starts with a few batches' worth (a batch is at most BatchSize), as the
// kernel gives most slots back before the next batch; a port whose ring is
// still full after a flush (its peer is slow to take the frames: bulk
// traffic) gets a ring of txFramesMax.
const (
	txFrameSize = ringFrameSize
	// txFrames is the transmit ring a port starts with (256 KiB).
	txFrames = 128
	// txFramesMax is the transmit ring of a busy port (2 MiB).
	txFramesMax = 1024
	// txDataOff is where a slot's data starts: TPACKET_ALIGN(sizeof(struct
	// tpacket2_hdr)), as the kernel reads it without PACKET_TX_HAS_OFF.
	txDataOff = 32
)

// bind binds the ring's socket to device ifindex.
func (r *txRing) bind(ifindex int) error {
	if err := unix.Bind(r.fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	return nil
}

// prepareTxRing opens a transmit socket and maps its ring of frames
// slots, unbound.
func prepareTxRing(frames int) (*txRing, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	fail := func(what string, err error) (*txRing, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	opts := []struct {
		opt, val int
		what     string
	}{
		{unix.PACKET_VNET_HDR, 1, "PACKET_VNET_HDR"},
		{unix.PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS"},
		// A malformed frame is skipped (its slot given back) rather than
		// stopping the ring.
		{unix.PACKET_LOSS, 1, "PACKET_LOSS"},
		{unix.PACKET_VERSION, unix.TPACKET_V2, "PACKET_VERSION"},
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, o.opt, o.val); err != nil {
			return fail(o.what, err)
		}
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
	}
	req := unix.TpacketReq{
		Block_size: ringBlockSize,
		Block_nr:   uint32(frames * txFrameSize / ringBlockSize),
		Frame_size: txFrameSize,
		Frame_nr:   uint32(frames),
	}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
		return fail("PACKET_TX_RING", err)
	}
	mem, err := unix.Mmap(fd, 0, frames*txFrameSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap transmit ring", err)
	}
	return &txRing{fd: fd, mem: mem, frames: frames}, nil
}

// slot is slot i's header and its bytes.
func (r *txRing) slot(i int) (*unix.Tpacket2Hdr, []byte) {
	b := r.mem[i*txFrameSize : (i+1)*txFrameSize]
	return (*unix.Tpacket2Hdr)(unsafe.Pointer(&b[0])), b
}

// fits reports whether p fits in a slot.
func (r *txRing) fits(p *Packet) bool { return txDataOff+vnetHdrLen+len(p.Data) <= txFrameSize }

// put writes p into the next slot and marks it for sending. It reports
// false if the kernel still holds that slot.
func (r *txRing) put(p *Packet) bool {
	h, b := r.slot(r.next)
	if atomic.LoadUint32(&h.Status) != unix.TP_STATUS_AVAILABLE {
		return false
	}
	encodeVnetHdr(b[txDataOff:txDataOff+vnetHdrLen], p.Offload)
	n := copy(b[txDataOff+vnetHdrLen:], p.Data)
	h.Len = uint32(vnetHdrLen + n)
	atomic.StoreUint32(&h.Status, unix.TP_STATUS_SEND_REQUEST)
	r.next = (r.next + 1) % r.frames
	return true
}

// flush asks the kernel to send every slot marked for sending, without
// waiting: slots it cannot take now (socket buffer full) stay marked and
// go with the next flush.
func (r *txRing) flush() error {
	for {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(r.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0, unix.EAGAIN, unix.ENOBUFS:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

func (r *txRing) close() {
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
		r.mem = nil
		_ = unix.Close(r.fd)
	}
}

// growTxRing replaces a's transmit ring with one of txFramesMax slots, on
// a socket of its own; the frames the old ring still holds go out before
// its socket closes, or are dropped. It is called by Send with txMu held
// and reports whether the port has the bigger ring.
func (a *AFPacket) growTxRing() bool {
	a.txGrown = true
	r, err := prepareTxRing(txFramesMax)
	if err != nil {
		return false
	}
	if err := r.bind(a.ifindex); err != nil {
		r.close()
		return false
	}
	a.txr.close()
	a.txr = r
	return true
}
