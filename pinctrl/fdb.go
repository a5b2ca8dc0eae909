package pinctrl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// FDBKey names an FDB row: a MAC on a switch.
type FDBKey struct {
	Switch uint32
	MAC    string // lower case, as net.HardwareAddr prints it
}

// FDBEntry is a MAC learned by put_fdb on a switch port: an FDB row to
// write.
type FDBEntry struct {
	FDBKey
	PortKey uint32
}

// putFDB runs put_fdb(inport, eth.src).
func (h *handling) putFDB(port, mac flow.U128) error {
	if _, ok := h.dp.PortNames[uint32(port.Lo)]; !ok {
		return fmt.Errorf("put_fdb: unknown logical port %d", port.Lo)
	}
	m := net.HardwareAddr{byte(mac.Lo >> 40), byte(mac.Lo >> 32), byte(mac.Lo >> 24), byte(mac.Lo >> 16), byte(mac.Lo >> 8), byte(mac.Lo)}
	h.out.FDBs = append(h.out.FDBs, FDBEntry{FDBKey{h.dp.Key, m.String()}, uint32(port.Lo)})
	return nil
}

// learnFDB hands an FDB entry to its writer unless the Southbound has it
// or it was just sent.
func (p *Pinctrl) learnFDB(e FDBEntry, st *State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k, ok := st.FDB[e.FDBKey]; ok && k == e.PortKey {
		p.fdbStats.Duplicates++
		return
	}
	if k, ok := p.recentFDB[e.FDBKey]; ok && k == e.PortKey {
		p.fdbStats.Duplicates++
		return
	}
	if len(p.recentFDB) >= maxRecent {
		clear(p.recentFDB)
	}
	select {
	case p.fdbs <- e:
		p.recentFDB[e.FDBKey] = e.PortKey
		p.fdbStats.Learned++
	default:
		p.fdbStats.QueueDrops++
	}
}

// writeFDBs writes the learned FDB entries, as many as wait in each
// transaction.
func (p *Pinctrl) writeFDBs(ctx context.Context) {
	writeLearned(ctx, p, "FDB", p.fdbs, &p.fdbStats, func(e FDBEntry) FDBKey { return e.FDBKey }, p.commitFDBs,
		func(batch map[FDBKey]FDBEntry) {
			for k := range batch {
				delete(p.recentFDB, k)
			}
		})
}

func (p *Pinctrl) commitFDBs(ctx context.Context, batch map[FDBKey]FDBEntry) (int, error) {
	c := p.cfg.SB()
	if c == nil {
		return 0, errors.New("no southbound")
	}
	n := 0
	_, err := c.Do(ctx, func(t *client.Txn) error {
		n = 0
		existing := map[FDBKey]sb.FDB{}
		for _, f := range client.List[sb.FDB](c.Cache()) {
			existing[FDBKey{uint32(f.DPKey), strings.ToLower(f.MAC)}] = f
		}
		for k, e := range batch {
			port := e.PortKey
			row := sb.FDB{DPKey: int64(k.Switch), MAC: k.MAC, PortKey: int64(port)}
			old, ok := existing[k]
			switch {
			case ok && old.PortKey == int64(port):
				continue
			case ok:
				t.UpdateModel(&row, old.UUID, "port_key")
			default:
				t.InsertModel(&row)
			}
			n++
		}
		return nil
	})
	return n, err
}
