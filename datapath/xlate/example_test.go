package xlate_test

import (
	"fmt"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/xlate"
)

// Program two tables in ovs-ofctl syntax, translate a packet, and read the
// megaflow and why it matches what it matches.
func Example() {
	tables := classifier.NewTables()
	var b flow.Bundle
	for _, s := range []string{
		"table=0,priority=120,tcp,nw_dst=10.0.0.100,tp_dst=80 actions=load:0x1->reg10[3],resubmit(,1)",
		"table=0,priority=0 actions=resubmit(,1)",
		"table=1,priority=50,eth_dst=02:00:00:00:00:0b actions=output:2",
	} {
		r, err := flow.ParseRule(s)
		if err != nil {
			panic(err)
		}
		b.Add(r)
	}
	if _, err := tables.Apply(b); err != nil {
		panic(err)
	}

	var k flow.Key
	k.Set(flow.InPort, 1)
	k.Set(flow.EthDst, 0x02000000000b)
	k.Set(flow.EthType, 0x0800)
	k.Set(flow.NWDst, 0x0a000002) // 10.0.0.2: not the VIP
	k.Set(flow.NWProto, 6)
	k.Set(flow.TPDst, 80)

	res := xlate.New(tables).Translate(&k, xlate.Options{})
	fmt.Println(res.String())
	for _, r := range res.Reasons {
		fmt.Printf("%s: %s in table %d\n", r.Field, r.Cause, r.Table)
	}
	// Output:
	// in_port=1,recirc_id=0,eth_type=0x800,eth_dst=02:00:00:00:00:0b,nw_dst=10.0.0.0/26 actions:2
	// eth_type: ruled out in table 0
	// nw_dst: ruled out in table 0
	// eth_dst: match in table 1
}
