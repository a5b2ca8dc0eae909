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

// Ring geometry: 2 KiB slots fit a 1500-byte MTU frame with its headers;
// 1024 of them absorb a burst of a few milliseconds.
const (
	ringFrameSize = 2048
	ringBlockSize = 1 << 16
	ringBlocks    = 32
)

// setupRxRing maps a receive ring on fd. PACKET_VNET_HDR must already be
// set; it must be called before bind.
func setupRxRing(fd int) (*rxRing, error) {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return nil, fmt.Errorf("PACKET_VERSION: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_COPY_THRESH, 1); err != nil {
		return nil, fmt.Errorf("PACKET_COPY_THRESH: %w", err)
	}
	req := unix.TpacketReq{
		Block_size: ringBlockSize,
		Block_nr:   ringBlocks,
		Frame_size: ringFrameSize,
		Frame_nr:   ringBlocks * ringBlockSize / ringFrameSize,
	}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, fmt.Errorf("PACKET_RX_RING: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, ringBlocks*ringBlockSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_LOCKED)
	if err != nil {
		mem, err = unix.Mmap(fd, 0, ringBlocks*ringBlockSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if err != nil {
		return nil, fmt.Errorf("mmap ring: %w", err)
	}
	return &rxRing{mem: mem, frameSize: ringFrameSize, frames: int(req.Frame_nr)}, nil
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
