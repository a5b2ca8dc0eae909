package northd

import "fmt"

// Pipeline is a logical pipeline: ingress or egress.
type Pipeline uint8

// The two pipelines of every logical datapath.
const (
	Ingress Pipeline = iota
	Egress
)

func (p Pipeline) String() string {
	if p == Egress {
		return "egress"
	}
	return "ingress"
}

// DatapathKind says whether a logical datapath is a switch or a router.
type DatapathKind uint8

// The kinds of logical datapaths.
const (
	Switch DatapathKind = iota
	Router
)

// Stage is one table of a logical pipeline. Stages are numbered and named
// exactly as ovn-northd 23.03 numbers and names them in the Southbound (its
// `ovn-sbctl lflow-list`, which is ahead of ovn-northd(8) for the router's
// egress tables), so that ovn-trace, ovn-controller and people read govn's
// Southbound as they read OVN's.
type Stage uint8

// Logical switch ingress stages.
const (
	LSInCheckPortSec Stage = iota
	LSInApplyPortSec
	LSInLookupFDB
	LSInPutFDB
	LSInPreACL
	LSInPreLB
	LSInPreStateful
	LSInACLHint
	LSInACL
	LSInQoSMark
	LSInQoSMeter
	LSInLBAffCheck
	LSInLB
	LSInLBAffLearn
	LSInPreHairpin
	LSInNATHairpin
	LSInHairpin
	LSInACLAfterLB
	LSInStateful
	LSInARPRsp
	LSInDHCPOptions
	LSInDHCPResponse
	LSInDNSLookup
	LSInDNSResponse
	LSInExternalPort
	LSInL2Lkup
	LSInL2Unknown

	// Logical switch egress stages.
	LSOutPreACL
	LSOutPreLB
	LSOutPreStateful
	LSOutACLHint
	LSOutACL
	LSOutQoSMark
	LSOutQoSMeter
	LSOutStateful
	LSOutCheckPortSec
	LSOutApplyPortSec

	// Logical router ingress stages.
	LRInAdmission
	LRInLookupNeighbor
	LRInLearnNeighbor
	LRInIPInput
	LRInUnsnat
	LRInDefrag
	LRInLBAffCheck
	LRInDNAT
	LRInLBAffLearn
	LRInECMPStateful
	LRInNDRAOptions
	LRInNDRAResponse
	LRInIPRoutingPre
	LRInIPRouting
	LRInIPRoutingECMP
	LRInPolicy
	LRInPolicyECMP
	LRInARPResolve
	LRInChkPktLen
	LRInLargerPkts
	LRInGWRedirect
	LRInARPRequest

	// Logical router egress stages.
	LROutChkDNATLocal
	LROutUndnat
	LROutPostUndnat
	LROutSnat
	LROutPostSnat
	LROutEgrLoop
	LROutDelivery

	numStages
)

// stageInfo describes a stage; stages lists them in Stage order.
type stageInfo struct {
	kind     DatapathKind
	pipeline Pipeline
	table    uint8
	name     string
}

var stages = [numStages]stageInfo{
	LSInCheckPortSec:  {Switch, Ingress, 0, "ls_in_check_port_sec"},
	LSInApplyPortSec:  {Switch, Ingress, 1, "ls_in_apply_port_sec"},
	LSInLookupFDB:     {Switch, Ingress, 2, "ls_in_lookup_fdb"},
	LSInPutFDB:        {Switch, Ingress, 3, "ls_in_put_fdb"},
	LSInPreACL:        {Switch, Ingress, 4, "ls_in_pre_acl"},
	LSInPreLB:         {Switch, Ingress, 5, "ls_in_pre_lb"},
	LSInPreStateful:   {Switch, Ingress, 6, "ls_in_pre_stateful"},
	LSInACLHint:       {Switch, Ingress, 7, "ls_in_acl_hint"},
	LSInACL:           {Switch, Ingress, 8, "ls_in_acl"},
	LSInQoSMark:       {Switch, Ingress, 9, "ls_in_qos_mark"},
	LSInQoSMeter:      {Switch, Ingress, 10, "ls_in_qos_meter"},
	LSInLBAffCheck:    {Switch, Ingress, 11, "ls_in_lb_aff_check"},
	LSInLB:            {Switch, Ingress, 12, "ls_in_lb"},
	LSInLBAffLearn:    {Switch, Ingress, 13, "ls_in_lb_aff_learn"},
	LSInPreHairpin:    {Switch, Ingress, 14, "ls_in_pre_hairpin"},
	LSInNATHairpin:    {Switch, Ingress, 15, "ls_in_nat_hairpin"},
	LSInHairpin:       {Switch, Ingress, 16, "ls_in_hairpin"},
	LSInACLAfterLB:    {Switch, Ingress, 17, "ls_in_acl_after_lb"},
	LSInStateful:      {Switch, Ingress, 18, "ls_in_stateful"},
	LSInARPRsp:        {Switch, Ingress, 19, "ls_in_arp_rsp"},
	LSInDHCPOptions:   {Switch, Ingress, 20, "ls_in_dhcp_options"},
	LSInDHCPResponse:  {Switch, Ingress, 21, "ls_in_dhcp_response"},
	LSInDNSLookup:     {Switch, Ingress, 22, "ls_in_dns_lookup"},
	LSInDNSResponse:   {Switch, Ingress, 23, "ls_in_dns_response"},
	LSInExternalPort:  {Switch, Ingress, 24, "ls_in_external_port"},
	LSInL2Lkup:        {Switch, Ingress, 25, "ls_in_l2_lkup"},
	LSInL2Unknown:     {Switch, Ingress, 26, "ls_in_l2_unknown"},
	LSOutPreACL:       {Switch, Egress, 0, "ls_out_pre_acl"},
	LSOutPreLB:        {Switch, Egress, 1, "ls_out_pre_lb"},
	LSOutPreStateful:  {Switch, Egress, 2, "ls_out_pre_stateful"},
	LSOutACLHint:      {Switch, Egress, 3, "ls_out_acl_hint"},
	LSOutACL:          {Switch, Egress, 4, "ls_out_acl"},
	LSOutQoSMark:      {Switch, Egress, 5, "ls_out_qos_mark"},
	LSOutQoSMeter:     {Switch, Egress, 6, "ls_out_qos_meter"},
	LSOutStateful:     {Switch, Egress, 7, "ls_out_stateful"},
	LSOutCheckPortSec: {Switch, Egress, 8, "ls_out_check_port_sec"},
	LSOutApplyPortSec: {Switch, Egress, 9, "ls_out_apply_port_sec"},

	LRInAdmission:      {Router, Ingress, 0, "lr_in_admission"},
	LRInLookupNeighbor: {Router, Ingress, 1, "lr_in_lookup_neighbor"},
	LRInLearnNeighbor:  {Router, Ingress, 2, "lr_in_learn_neighbor"},
	LRInIPInput:        {Router, Ingress, 3, "lr_in_ip_input"},
	LRInUnsnat:         {Router, Ingress, 4, "lr_in_unsnat"},
	LRInDefrag:         {Router, Ingress, 5, "lr_in_defrag"},
	LRInLBAffCheck:     {Router, Ingress, 6, "lr_in_lb_aff_check"},
	LRInDNAT:           {Router, Ingress, 7, "lr_in_dnat"},
	LRInLBAffLearn:     {Router, Ingress, 8, "lr_in_lb_aff_learn"},
	LRInECMPStateful:   {Router, Ingress, 9, "lr_in_ecmp_stateful"},
	LRInNDRAOptions:    {Router, Ingress, 10, "lr_in_nd_ra_options"},
	LRInNDRAResponse:   {Router, Ingress, 11, "lr_in_nd_ra_response"},
	LRInIPRoutingPre:   {Router, Ingress, 12, "lr_in_ip_routing_pre"},
	LRInIPRouting:      {Router, Ingress, 13, "lr_in_ip_routing"},
	LRInIPRoutingECMP:  {Router, Ingress, 14, "lr_in_ip_routing_ecmp"},
	LRInPolicy:         {Router, Ingress, 15, "lr_in_policy"},
	LRInPolicyECMP:     {Router, Ingress, 16, "lr_in_policy_ecmp"},
	LRInARPResolve:     {Router, Ingress, 17, "lr_in_arp_resolve"},
	LRInChkPktLen:      {Router, Ingress, 18, "lr_in_chk_pkt_len"},
	LRInLargerPkts:     {Router, Ingress, 19, "lr_in_larger_pkts"},
	LRInGWRedirect:     {Router, Ingress, 20, "lr_in_gw_redirect"},
	LRInARPRequest:     {Router, Ingress, 21, "lr_in_arp_request"},
	LROutChkDNATLocal:  {Router, Egress, 0, "lr_out_chk_dnat_local"},
	LROutUndnat:        {Router, Egress, 1, "lr_out_undnat"},
	LROutPostUndnat:    {Router, Egress, 2, "lr_out_post_undnat"},
	LROutSnat:          {Router, Egress, 3, "lr_out_snat"},
	LROutPostSnat:      {Router, Egress, 4, "lr_out_post_snat"},
	LROutEgrLoop:       {Router, Egress, 5, "lr_out_egr_loop"},
	LROutDelivery:      {Router, Egress, 6, "lr_out_delivery"},
}

// Kind returns the kind of datapath whose pipeline has s.
func (s Stage) Kind() DatapathKind { return stages[s].kind }

// Pipeline returns the pipeline s belongs to.
func (s Stage) Pipeline() Pipeline { return stages[s].pipeline }

// Table returns s's table number within its pipeline (Logical_Flow.table_id).
func (s Stage) Table() uint8 { return stages[s].table }

// Name returns s's name as the Southbound's external_ids:stage-name has it.
func (s Stage) Name() string { return stages[s].name }

func (s Stage) String() string {
	if s >= numStages {
		return fmt.Sprintf("Stage(%d)", uint8(s))
	}
	return stages[s].name
}

// stageByTable finds the stage of a datapath kind, pipeline and table.
func stageByTable(k DatapathKind, p Pipeline, table uint8) (Stage, bool) {
	for s := Stage(0); s < numStages; s++ {
		if i := stages[s]; i.kind == k && i.pipeline == p && i.table == table {
			return s, true
		}
	}
	return 0, false
}
