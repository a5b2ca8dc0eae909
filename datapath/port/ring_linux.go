package port

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rxRing is a TPACKET_V2 receive ring shared with the kernel: the kernel
// copies each frame into the next free slot as it arrives (in the sender's
// context), so the switch reads frames from memory instead of paying a
// system call and a socket-queue round trip per batch, and sleeps in
// poll(2) only when the ring is empty. A frame too big for a slot (a GSO
// segment) is also queued on the socket (PACKET_COPY_THRESH), and read from
// there whole.
type rxRing struct {
	mem       []byte
	frameSize int
	frames    int
	next      int
}

// Ring geometry: 2 KiB slots fit a 1500-byte MTU frame with its headers.
// A port starts with a small ring, as most ports (VIFs) are idle most of
// the time and a hypervisor has hundreds: every ring is resident whole
// (the kernel allocates its pages when it is set up). A port whose ring
// fills to half its slots is carrying a burst it cannot keep up with, so
// its ring grows to the full size, which absorbs a burst of a few
// milliseconds.
const (
	ringFrameSize = 2048
	ringBlockSize = 1 << 16
	// rxRingFrames is the receive ring a port starts with (256 KiB).
	rxRingFrames = 128
	// rxRingFramesMax is the receive ring of a busy port (2 MiB).
	rxRingFramesMax = 1024
)

// setupRxRing maps a receive ring of frames slots on fd. PACKET_VNET_HDR
// must already be set; it must be called before bind.
func setupRxRing(fd, frames int) (*rxRing, error) {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return nil, fmt.Errorf("PACKET_VERSION: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_COPY_THRESH, 1); err != nil {
		return nil, fmt.Errorf("PACKET_COPY_THRESH: %w", err)
	}
	return mapRxRing(fd, frames)
}

// mapRxRing sets up the kernel's receive ring of frames slots on fd,
// replacing the one it has, if any (which must not be mapped), and maps it.
func mapRxRing(fd, frames int) (*rxRing, error) {
	size := frames * ringFrameSize
	req := unix.TpacketReq{
		Block_size: ringBlockSize,
		Block_nr:   uint32(size / ringBlockSize),
		Frame_size: ringFrameSize,
		Frame_nr:   uint32(frames),
	}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, fmt.Errorf("PACKET_RX_RING: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_LOCKED)
	if err != nil {
		mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if err != nil {
		return nil, fmt.Errorf("mmap ring: %w", err)
	}
	return &rxRing{mem: mem, frameSize: ringFrameSize, frames: frames}, nil
}

// backlogged reports whether the kernel has filled the slot half a ring
// ahead of the next one to read: the reader is falling behind.
func (r *rxRing) backlogged() bool {
	h, _ := r.slot((r.next + r.frames/2) % r.frames)
	return r.status(h)&unix.TP_STATUS_USER != 0
}

// growRxRing replaces a's receive ring with one of rxRingFramesMax
// slots; the frames still in the old ring are lost. It is called by Recv
// with ringMu held. If the kernel refuses the bigger ring, the port gets
// one as big as it had, or none (then recvmmsg does the job).
func (a *AFPacket) growRxRing() {
	a.rxGrown = true
	old := a.ring
	a.ring = nil
	var fd int
	_ = a.raw.Control(func(f uintptr) { fd = int(f) })
	old.close()
	// The kernel replaces no ring: the old one goes first.
	if unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &unix.TpacketReq{}) != nil {
		// The old ring stays in the kernel: map it again.
		if mem, err := unix.Mmap(fd, 0, old.frames*ringFrameSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
			a.ring = &rxRing{mem: mem, frameSize: ringFrameSize, frames: old.frames, next: old.next}
		}
		return
	}
	for _, frames := range []int{rxRingFramesMax, old.frames} {
		if r, err := mapRxRing(fd, frames); err == nil {
			a.ring = r
			return
		}
	}
}

// slot is a frame slot's header and its bytes.
func (r *rxRing) slot(i int) (*unix.Tpacket2Hdr, []byte) {
	b := r.mem[i*r.frameSize : (i+1)*r.frameSize]
	return (*unix.Tpacket2Hdr)(unsafe.Pointer(&b[0])), b
}

func (r *rxRing) status(h *unix.Tpacket2Hdr) uint32 { return atomic.LoadUint32(&h.Status) }

// release gives the current slot back to the kernel and moves on.
func (r *rxRing) release(h *unix.Tpacket2Hdr) {
	atomic.StoreUint32(&h.Status, unix.TP_STATUS_KERNEL)
	r.next = (r.next + 1) % r.frames
}

func (r *rxRing) close() {
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
		r.mem = nil
	}
}

// recvRing is Recv for a port with a receive ring.
func (a *AFPacket) recvRing(pkts []*Packet) (int, error) {
	r := a.ring
	for {
		a.ringMu.Lock()
		if a.closed.Load() {
			a.ringMu.Unlock()
			return 0, ErrClosed
		}
		got := 0
		for got < len(pkts) {
			h, b := r.slot(r.next)
			st := r.status(h)
			if st&unix.TP_STATUS_USER == 0 {
				break
			}
			p := pkts[got]
			p.Reset()
			if st&unix.TP_STATUS_COPY != 0 {
				// Too big for the slot: the whole frame is on the socket.
				r.release(h)
				if a.recvCopy(p) {
					got++
				}
				continue
			}
			mac, snap := int(h.Mac), int(h.Snaplen)
			if mac < vnetHdrLen || mac+snap > len(b) || snap < 14 {
				r.release(h)
				a.rxDropped.Add(1)
				continue
			}
			p.setLen(copy(p.space(), b[mac:mac+snap]))
			p.Offload = decodeVnetHdr(b[mac-vnetHdrLen : mac])
			if st&unix.TP_STATUS_VLAN_VALID != 0 {
				tpid := uint16(etherTypeVLAN)
				if st&unix.TP_STATUS_VLAN_TPID_VALID != 0 && h.Vlan_tpid != 0 {
					tpid = h.Vlan_tpid
				}
				p.PushVLAN(tpid, h.Vlan_tci)
			}
			r.release(h)
			a.rxBytes.Add(uint64(len(p.Data)))
			got++
		}
		if got == len(pkts) && !a.rxGrown && r.backlogged() {
			a.growRxRing()
		}
		a.ringMu.Unlock()
		if got > 0 {
			a.rxPackets.Add(uint64(got))
			a.rxBatches.Add(1)
			return got, nil
		}
		if a.closed.Load() {
			return 0, ErrClosed
		}
		// Sleep until the kernel fills the slot (or the timeout passes,
		// to notice Close).
		err := a.raw.Control(func(fd uintptr) {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLERR}}
			_, _ = unix.Poll(pfd, int(recvTimeout.Milliseconds()))
		})
		if err != nil || a.closed.Load() {
			return 0, ErrClosed
		}
	}
}

// recvCopy reads one whole frame from the socket queue into p.
func (a *AFPacket) recvCopy(p *Packet) bool {
	a.rx.setData(0, p.space())
	var got int
	var e unix.Errno
	err := a.raw.Control(func(fd uintptr) {
		r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&a.rx.msgs[0])), 1, unix.MSG_DONTWAIT, 0, 0)
		got, e = int(r), errno
	})
	if err != nil || e != 0 || got != 1 {
		a.rxDropped.Add(1)
		return false
	}
	return a.takeMsg(0, p)
}
