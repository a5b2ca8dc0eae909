package dp

import (
	"encoding/binary"

	"github.com/govn/govn/datapath/port"
)

// pushVLAN inserts a VLAN tag behind the MAC addresses. tci is OVS's
// vlan_tci, whose CFI bit means "present" and is not written.
func pushVLAN(p *port.Packet, tpid, tci uint16) {
	if len(p.Data) < 12 {
		return
	}
	p.Push(4)
	d := p.Data
	copy(d[0:12], d[4:16])
	binary.BigEndian.PutUint16(d[12:], tpid)
	binary.BigEndian.PutUint16(d[14:], tci&^0x1000)
	if p.Offload.NeedsCsum || p.Offload.IsGSO() {
		p.Offload.CsumStart += 4
		if p.Offload.HdrLen != 0 {
			p.Offload.HdrLen += 4
		}
	}
}

// popVLAN removes the outermost VLAN tag, if there is one.
func popVLAN(p *port.Packet) {
	d := p.Data
	if len(d) < 18 {
		return
	}
	if t := binary.BigEndian.Uint16(d[12:]); t != etherTypeVLAN && t != etherTypeQinQ {
		return
	}
	copy(d[4:16], d[0:12])
	p.Pull(4)
	if (p.Offload.NeedsCsum || p.Offload.IsGSO()) && p.Offload.CsumStart >= 4 {
		p.Offload.CsumStart -= 4
		if p.Offload.HdrLen >= 4 {
			p.Offload.HdrLen -= 4
		}
	}
}
