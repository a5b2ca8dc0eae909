package conntrack

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestExpireSkipsZones spreads connections over many zones, created at
// different times, and calls Expire at random, sometimes hours apart; after
// each call every zone must hold exactly the connections whose timeout has
// not passed at the wheel's resolution, whether Expire visited the zone or
// skipped it as having nothing due.
func TestExpireSkipsZones(t *testing.T) {
	for _, timeout := range []time.Duration{3 * time.Second, 2 * time.Hour, 30 * time.Hour} {
		t.Run(fmt.Sprint(timeout), func(t *testing.T) {
			to := DefaultTimeouts()
			to.UDPFirst = timeout
			tr := newTracker(t, Config{Timeouts: &to})
			rng := rand.New(rand.NewPCG(uint64(timeout), 1))
			type conn struct {
				zone    uint16
				expires time.Duration
			}
			var conns []conn
			now := time.Duration(0)
			zones := []uint16{0, 1, 63, 64, 65, 1000, 40000, 65535}
			for step := range 120 {
				// New connections in a few zones, then an Expire.
				for range rng.IntN(5) {
					z := zones[rng.IntN(len(zones))]
					i := len(conns)
					s, _ := udpTo(z, i)
					tr.Process(build(s), 0, Params{Zone: z, Commit: true}, now)
					conns = append(conns, conn{z, now + timeout})
				}
				switch rng.IntN(4) {
				case 0:
					now += time.Duration(rng.IntN(10)) * time.Hour
				default:
					now += time.Duration(rng.IntN(2000)) * time.Millisecond
				}
				expired := 0
				nowTick := int64(now) >> wheelShift
				left := map[uint16]int{}
				for _, c := range conns {
					if int64(c.expires)>>wheelShift >= nowTick {
						left[c.zone]++
					} else {
						expired++
					}
				}
				before := tr.Stats().Expired
				if got, want := tr.Expire(now), expired-int(before); got != want {
					t.Fatalf("step %d at %v: Expire removed %d, want %d", step, now, got, want)
				}
				for _, z := range zones {
					if n := count(tr, z); n != left[z] {
						t.Fatalf("step %d at %v: zone %d holds %d, want %d", step, now, z, n, left[z])
					}
				}
			}
		})
	}
}
