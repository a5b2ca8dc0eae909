package xlate

import (
	"slices"
	"time"
)

// DefaultRecircGrace is how long a recirculation state that no installed
// megaflow holds survives: long enough for a translation's result to be
// installed, and for packets already recirculated towards the state to be
// translated, after the last megaflow that held it went away.
const DefaultRecircGrace = time.Second

// Option configures a Translator.
type Option func(*Translator)

// WithClock makes the translator read time from now (tests use a fake
// clock); the default is the wall clock.
func WithClock(now func() time.Time) Option { return func(t *Translator) { t.now = now } }

// WithRecircGrace sets the grace period of unheld recirculation states.
func WithRecircGrace(d time.Duration) Option { return func(t *Translator) { t.grace = d } }

// recircState is one frozen state with its references.
type recircState struct {
	fs   frozenState
	id   uint32
	refs int       // installed megaflows whose actions recirculate into it
	used time.Time // last freeze, resume or release
}

// Recircs are the recirculation states that a translation's actions
// recirculate into. A cache that installs the actions calls Hold, and
// Release when it deletes them; a state that nothing holds is freed once it
// has not been used for the grace period. The zero value holds nothing.
type Recircs struct {
	t   *Translator
	ids []uint32
}

// IDs returns the recirc_ids, in the order the actions name them.
func (r Recircs) IDs() []uint32 { return r.ids }

// Hold takes a reference on every state.
func (r Recircs) Hold() { r.add(1) }

// Release drops the references Hold took.
func (r Recircs) Release() { r.add(-1) }

func (r Recircs) add(d int) {
	if r.t == nil || len(r.ids) == 0 {
		return
	}
	t := r.t
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, id := range r.ids {
		// A state freed while a result waited to be installed (a stalled
		// worker) is not resurrected: its megaflow's recirculations miss
		// and are dropped until revalidation or expiry replaces it.
		if s := t.byID[id]; s != nil {
			s.refs += d
			s.used = now
		}
	}
}

// state returns the frozen state of id and marks it used.
func (t *Translator) state(id uint32) (frozenState, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.byID[id]
	if s == nil {
		return frozenState{}, false
	}
	s.used = t.now()
	return s.fs, true
}

// freeze returns the recirc_id of a state, allocating one if it is new.
// Allocation sweeps unheld states past their grace period at most once a
// grace period, so the number of states stays proportional to those held
// plus those used recently.
func (t *Translator) freeze(fs frozenState) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if s := t.frozen[fs]; s != nil {
		s.used = now
		return s.id
	}
	if now.Sub(t.lastSweep) >= t.grace {
		t.sweep(now)
	}
	// Ids are not reused until the 32-bit space wraps, so a megaflow that
	// still matches a freed id (it idles out) never meets a new state.
	for {
		t.nextID++
		if t.nextID != 0 && t.byID[t.nextID] == nil {
			break
		}
	}
	s := &recircState{fs: fs, id: t.nextID, used: now}
	t.byID[s.id] = s
	t.frozen[fs] = s
	return s.id
}

func (t *Translator) sweep(now time.Time) {
	t.lastSweep = now
	for id, s := range t.byID {
		if s.refs <= 0 && now.Sub(s.used) >= t.grace {
			delete(t.byID, id)
			delete(t.frozen, s.fs)
		}
	}
}

// RecircStates returns how many frozen states are allocated.
func (t *Translator) RecircStates() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// recircs records that the translation's actions recirculate into id.
func (c *ctx) recircs(id uint32) {
	r := &c.res.Recircs
	r.t = c.t
	if !slices.Contains(r.ids, id) {
		r.ids = append(r.ids, id)
	}
}
