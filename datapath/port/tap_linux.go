package port

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TAP is a port on a Linux TAP device: what the switch sends comes out of
// the device into the host's stack, and what the host sends into the
// device reaches the switch. Frames carry a virtio-net header, so the host
// may hand over partial checksums and large TCP segments and take them back.
type TAP struct {
	name   string
	file   *os.File
	raw    syscall.RawConn
	closed atomic.Bool
	txMu   sync.Mutex
	rxHdr  [vnetHdrLen]byte
	txHdr  [vnetHdrLen]byte
	counters
}

// NewTAP creates (or attaches to) the TAP device called name and sets it
// up. The device lives as long as the port, unless it was made persistent.
func NewTAP(name string) (*TAP, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("tap port %s: %w", name, err)
	}
	fail := func(what string, err error) (*TAP, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("tap port %s: %s: %w", name, what, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fail("name", err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fail("TUNSETIFF", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, vnetHdrLen); err != nil {
		return fail("TUNSETVNETHDRSZ", err)
	}
	// Let the host send us partial checksums, TCP segments up to 64 KiB
	// and, where the kernel has it (Linux 6.2), runs of UDP datagrams
	// (USO): a tunnel port's UDP_SEGMENT sends then cross the switch as
	// one frame, not one frame a datagram.
	offloads := unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETOFFLOAD, uintptr(offloads|tunFUSO4|tunFUSO6)); e != 0 {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETOFFLOAD, uintptr(offloads)); e != 0 {
			return fail("TUNSETOFFLOAD", e)
		}
	}
	name = ifr.Name()
	if err := setLinkUp(name); err != nil {
		return fail("link up", err)
	}
	f := os.NewFile(uintptr(fd), "tap:"+name)
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tap port %s: %w", name, err)
	}
	return &TAP{name: name, file: f, raw: raw}, nil
}

// TUN_F_USO4 and TUN_F_USO6 from linux/if_tun.h, which x/sys/unix lacks.
const (
	tunFUSO4 = 0x20
	tunFUSO6 = 0x40
)

// NewInternal creates the internal port of a bridge: a TAP device named
// after the bridge through which the host itself joins the switch.
func NewInternal(name string) (*TAP, error) { return NewTAP(name) }

// Name implements Port.
func (t *TAP) Name() string { return t.name }

// Offloads implements Port.
func (t *TAP) Offloads() bool { return true }

// Recv implements Port. It returns one frame per call: a TAP device
// delivers one frame per read.
func (t *TAP) Recv(pkts []*Packet) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	p := pkts[0]
	p.Reset()
	buf := p.space()
	iov := [2]unix.Iovec{{Base: &t.rxHdr[0]}, {Base: &buf[0]}}
	iov[0].SetLen(vnetHdrLen)
	iov[1].SetLen(len(buf))
	var n int
	var serr error
	err := t.raw.Read(func(fd uintptr) bool {
		r, _, e := unix.Syscall(unix.SYS_READV, fd, uintptr(unsafe.Pointer(&iov[0])), 2)
		if e == unix.EAGAIN {
			return false
		}
		n, serr = int(r), nil
		if e != 0 {
			serr = e
		}
		return true
	})
	if err != nil || serr != nil {
		if t.closed.Load() {
			return 0, ErrClosed
		}
		return 0, fmt.Errorf("tap port %s: read: %w", t.name, errOr(err, serr))
	}
	if n-vnetHdrLen < 14 {
		t.rxDropped.Add(1)
		return 0, nil
	}
	p.setLen(n - vnetHdrLen)
	p.Offload = decodeVnetHdr(t.rxHdr[:])
	t.rxPackets.Add(1)
	t.rxBytes.Add(uint64(len(p.Data)))
	return 1, nil
}

func errOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Send implements Port.
func (t *TAP) Send(pkts []*Packet) error {
	t.txMu.Lock()
	defer t.txMu.Unlock()
	for _, p := range pkts {
		if len(p.Data) == 0 {
			continue
		}
		encodeVnetHdr(t.txHdr[:], p.Offload)
		iov := [2]unix.Iovec{{Base: &t.txHdr[0]}, {Base: &p.Data[0]}}
		iov[0].SetLen(vnetHdrLen)
		iov[1].SetLen(len(p.Data))
		var serr error
		err := t.raw.Write(func(fd uintptr) bool {
			_, _, e := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), 2)
			if e == unix.EAGAIN {
				return false
			}
			serr = nil
			if e != 0 {
				serr = e
			}
			return true
		})
		if err != nil {
			if t.closed.Load() {
				return ErrClosed
			}
			return fmt.Errorf("tap port %s: write: %w", t.name, err)
		}
		if serr != nil {
			t.txErrors.Add(1)
			t.txDropped.Add(1)
			continue
		}
		t.txPackets.Add(1)
		t.txBytes.Add(uint64(len(p.Data)))
	}
	return nil
}

// Stats implements Port.
func (t *TAP) Stats() Stats { return t.snapshot() }

// SetMTU sets the device's MTU.
func (t *TAP) SetMTU(mtu int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tap port %s: mtu: %w", t.name, err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(t.name)
	if err != nil {
		return fmt.Errorf("tap port %s: mtu: %w", t.name, err)
	}
	ifr.SetUint32(uint32(mtu))
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFMTU, ifr); err != nil {
		return fmt.Errorf("tap port %s: set mtu %d: %w", t.name, mtu, err)
	}
	return nil
}

// SetPersistent says whether the device outlives the port (TUNSETPERSIST).
// A bridge's internal device is persistent so that it keeps the addresses
// the host gave it across a crash and restart of the switch, as Open
// vSwitch's are; clearing it before Close removes the device with the port.
func (t *TAP) SetPersistent(on bool) error {
	v := 0
	if on {
		v = 1
	}
	var serr error
	err := t.raw.Control(func(fd uintptr) {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, unix.TUNSETPERSIST, uintptr(v)); e != 0 {
			serr = e
		}
	})
	if err = errOr(err, serr); err != nil {
		return fmt.Errorf("tap port %s: TUNSETPERSIST: %w", t.name, err)
	}
	return nil
}

// Close implements Port.
func (t *TAP) Close() error {
	t.closed.Store(true)
	return t.file.Close()
}
