package dp

import (
	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/xlate"
)

// Pipeline is a bridge's flow tables with their translator: what the
// controller programs (it is a flow.Programmer) and the datapath's slow
// path (it is a SlowPath). Workers notice a new generation before their
// next packet and revalidate their megaflows.
type Pipeline struct {
	tables *classifier.Tables
	xl     *xlate.Translator
}

// NewPipeline returns empty flow tables: every packet is dropped.
func NewPipeline() *Pipeline {
	ts := classifier.NewTables()
	return &Pipeline{tables: ts, xl: xlate.New(ts)}
}

// Apply applies a bundle of flow-table changes atomically.
func (p *Pipeline) Apply(b flow.Bundle) (uint64, error) { return p.tables.Apply(b) }

// Generation implements flow.Programmer and SlowPath.
func (p *Pipeline) Generation() uint64 { return p.tables.Generation() }

// Translate implements SlowPath.
func (p *Pipeline) Translate(k *flow.Key, opts xlate.Options) xlate.Result {
	return p.xl.Translate(k, opts)
}

// TranslateFrom implements Injector.
func (p *Pipeline) TranslateFrom(k *flow.Key, s xlate.Start, opts xlate.Options) xlate.Result {
	return p.xl.TranslateFrom(k, s, opts)
}

// ChangedSince reports whether any of tables, or any group if groups,
// changed after generation since; revalidation skips megaflows whose
// tables did not change.
func (p *Pipeline) ChangedSince(since uint64, tables *flow.TableSet, groups bool) bool {
	return p.tables.ChangedSince(since, tables, groups)
}

// Tables returns the flow tables, for dumps and table counters.
func (p *Pipeline) Tables() *classifier.Tables { return p.tables }
