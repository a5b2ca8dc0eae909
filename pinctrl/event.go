package pinctrl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/govn/govn/lflow"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// ControllerEvent is an event for the CMS that trigger_event raised: a
// Controller_Event row to write.
type ControllerEvent struct {
	Type string            // "empty_lb_backends"
	Info map[string]string // vip, protocol, load_balancer
}

// Key names an event by its contents: rows of equal key are duplicates.
func (e ControllerEvent) Key() string { return eventKey(e.Type, e.Info) }

func eventKey(typ string, info map[string]string) string {
	keys := make([]string, 0, len(info))
	for k := range info {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(typ)
	for _, k := range keys {
		fmt.Fprintf(&b, "\x00%s=%s", k, info[k])
	}
	return b.String()
}

// eventOptions are the options trigger_event carries into event_info,
// per event (ovn-sb(5), Controller_Event).
var eventOptions = map[string][]string{
	"empty_lb_backends": {"vip", "protocol", "load_balancer"},
}

// triggerEvent runs trigger_event(event = "TYPE", OPTION = "VALUE", ...).
func (h *handling) triggerEvent(a *lflow.CallAction) error {
	ev := ControllerEvent{Info: map[string]string{}}
	for _, arg := range a.Args {
		if len(arg.Value) != 1 || arg.Value[0].Kind != lflow.TokString {
			return fmt.Errorf("trigger_event: argument %s is not a string", arg.Key)
		}
		if arg.Key == "event" {
			ev.Type = arg.Value[0].Str
		} else {
			ev.Info[arg.Key] = arg.Value[0].Str
		}
	}
	want, ok := eventOptions[ev.Type]
	if !ok {
		return fmt.Errorf("trigger_event: unknown event %q", ev.Type)
	}
	for _, k := range want {
		if ev.Info[k] == "" {
			return fmt.Errorf("trigger_event %s: no %s", ev.Type, k)
		}
	}
	for k := range ev.Info {
		if !containsString(want, k) {
			delete(ev.Info, k) // meter and the like are not event info
		}
	}
	h.out.Events = append(h.out.Events, ev)
	return nil
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// maxPendingEvents bounds the events remembered as sent.
const maxPendingEvents = 4096

// raiseEvent hands an event to the writer unless this chassis' row for
// it is in the Southbound or it was just sent. An event whose row the
// CMS deleted is raised again by the next packet that triggers it.
func (p *Pinctrl) raiseEvent(e ControllerEvent, st *State, now time.Time) {
	key := e.Key()
	p.mu.Lock()
	defer p.mu.Unlock()
	if st.Events[key] {
		p.eventStats.Duplicates++
		return
	}
	offerRecent(p.events, e, key, p.recentEvents, maxPendingEvents, &p.eventStats, now)
}

// writeEvents writes the raised events as Controller_Event rows of this
// chassis, each with the next sequence number, as many as wait in each
// transaction.
func (p *Pinctrl) writeEvents(ctx context.Context) {
	writeLearned(ctx, p, "controller events", p.events, &p.eventStats, ControllerEvent.Key, p.commitEvents,
		func(batch map[string]ControllerEvent) {
			for k := range batch {
				delete(p.recentEvents, k)
			}
		})
}

// commitEvents inserts the batch's events that this chassis has no row
// for, numbered in the order of their keys.
func (p *Pinctrl) commitEvents(ctx context.Context, batch map[string]ControllerEvent) (int, error) {
	if p.cfg.SB == nil {
		return 0, errors.New("no southbound") // tests without one
	}
	c := p.cfg.SB()
	if c == nil {
		return 0, errors.New("no southbound")
	}
	me, err := p.chassisUUID(c)
	if err != nil {
		return 0, err
	}
	n := 0
	_, err = c.Do(ctx, func(t *client.Txn) error {
		n = 0
		var seq int64
		have := map[string]bool{}
		for _, r := range client.List[sb.ControllerEvent](c.Cache()) {
			seq = max(seq, r.SeqNum)
			if r.Chassis != nil && *r.Chassis == me {
				have[eventKey(r.EventType, r.EventInfo)] = true
			}
		}
		for _, key := range slices.Sorted(maps.Keys(batch)) {
			e := batch[key]
			if have[key] {
				continue
			}
			have[key] = true
			seq++
			id := me
			t.InsertModel(&sb.ControllerEvent{EventType: e.Type, EventInfo: e.Info, Chassis: &id, SeqNum: seq})
			n++
		}
		return nil
	})
	return n, err
}
