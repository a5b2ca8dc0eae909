package xlate

import (
	"fmt"
	"time"

	"github.com/govn/govn/datapath/flow"
)

// learnSweepInterval is how often idle learned rules are looked for.
const learnSweepInterval = 100 * time.Millisecond

// learnKey names a learned rule as the tables do.
type learnKey struct {
	table    uint8
	priority uint16
	match    flow.Match
}

// learnedRule is a rule a learn action installed, with its timeouts.
type learnedRule struct {
	rule          flow.Rule
	idle, hard    time.Duration
	created, used time.Time
}

// pendingLearn is a rule a translation learned.
type pendingLearn struct {
	rule       flow.Rule
	idle, hard time.Duration
}

// Learned holds the rules a translation's learn actions produced. The
// translation does not install them: whoever uses the translation does,
// with Install (the megaflow cache does on Insert), so re-translations
// that only check a megaflow (revalidation) do not renew them. While the
// megaflow is used, Refresh keeps the rules from idling out (and puts back
// any that did), as a packet running the learn action again would.
// Translator is set whenever the translator has learned rules, so a cache
// can have it expire idle ones (ExpireLearned).
type Learned struct {
	t     *Translator
	rules []pendingLearn
}

// Translator returns the translator that learned the rules, or nil.
func (l Learned) Translator() *Translator { return l.t }

// Len returns how many rules the translation learned.
func (l Learned) Len() int { return len(l.rules) }

// Install puts the rules into the flow tables (a no-op for rules already
// there, which are only marked used).
func (l Learned) Install() error {
	if l.t == nil || len(l.rules) == 0 {
		return nil
	}
	return l.t.install(l.rules)
}

// Refresh marks the rules used now, installing those that idled out.
func (l Learned) Refresh() {
	if l.t == nil || len(l.rules) == 0 {
		return
	}
	t := l.t
	t.lmu.Lock()
	now := t.now()
	missing := false
	for _, r := range l.rules {
		if lr := t.learned[r.key()]; lr != nil {
			lr.used = now
		} else {
			missing = true
		}
	}
	t.lmu.Unlock()
	if missing {
		// Errors were reported by the first Install.
		_ = t.install(l.rules)
	}
}

func (p *pendingLearn) key() learnKey {
	return learnKey{p.rule.Table, p.rule.Priority, p.rule.Match}
}

// LearnedRules returns how many learned rules are installed.
func (t *Translator) LearnedRules() int {
	t.lmu.Lock()
	defer t.lmu.Unlock()
	return len(t.learned)
}

// learn runs a learn action: the rule is built from the working key now
// and handed to the caller in Result.Learned.
func (c *ctx) learn(a flow.Learn) {
	values := make([]flow.U128, len(a.Specs))
	for i, s := range a.Specs {
		values[i] = s.Value
		if s.Src.Field.Valid() {
			values[i] = c.readField(s.Src, "learn")
		}
	}
	r := a.Rule(values)
	r.Match.Normalize()
	c.learns = append(c.learns, pendingLearn{rule: r,
		idle: time.Duration(a.IdleTimeout) * time.Second, hard: time.Duration(a.HardTimeout) * time.Second})
	if c.opts.Trace {
		c.step(Step{Table: c.table, Note: "learn: " + r.String()})
	}
}

// install puts learned rules into the tables and marks them used.
func (t *Translator) install(ls []pendingLearn) error {
	t.lmu.Lock()
	defer t.lmu.Unlock()
	now := t.now()
	rules := make([]flow.Rule, 0, len(ls))
	for _, l := range ls {
		k := l.key()
		lr := t.learned[k]
		if lr == nil || flow.ActionsString(lr.rule.Actions) != flow.ActionsString(l.rule.Actions) {
			lr = &learnedRule{rule: l.rule, created: now}
			t.learned[k] = lr
		}
		lr.idle, lr.hard, lr.used = l.idle, l.hard, now
		rules = append(rules, l.rule)
	}
	t.nLearned.Store(int64(len(t.learned)))
	if _, _, err := t.tables.Learn(rules); err != nil {
		return fmt.Errorf("learn: %w", err)
	}
	return nil
}

// ExpireLearned removes learned rules whose idle or hard timeout passed.
// Translations and caches call it; it does the work at most every
// learnSweepInterval.
func (t *Translator) ExpireLearned() {
	if t.nLearned.Load() == 0 {
		return
	}
	t.lmu.Lock()
	defer t.lmu.Unlock()
	now := t.now()
	if now.Sub(t.lastLearnSweep) < learnSweepInterval {
		return
	}
	t.lastLearnSweep = now
	var gone []flow.Rule
	for k, lr := range t.learned {
		if lr.idle > 0 && now.Sub(lr.used) >= lr.idle || lr.hard > 0 && now.Sub(lr.created) >= lr.hard {
			gone = append(gone, lr.rule)
			delete(t.learned, k)
		}
	}
	t.nLearned.Store(int64(len(t.learned)))
	if len(gone) > 0 {
		// Forget fails only on rules Learn accepted, so never.
		_, _, _ = t.tables.Forget(gone)
	}
}
