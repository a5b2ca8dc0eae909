package lflow

// The options of put_dhcp_opts, put_dhcpv6_opts, put_nd_ra_opts and
// trigger_event. ovn-controller reads the DHCP ones from the Southbound
// DHCP_Options and DHCPv6_Options tables, which ovn-northd fills at
// start; the tables here are what ovn-northd 23.03 writes there
// (TestDHCPOptionsDifferential compares them with a real ovn-northd's).

// OptionType is the type of an option's value, as the Southbound's type
// column names it.
type OptionType uint8

// Option types. Those of strings (OptStr, OptDomains, OptDomain) take a
// quoted string, OptHostID either a string or a number, the others numbers
// (addresses included).
const (
	OptIPv4         OptionType = iota // "ipv4": one or more IPv4 addresses
	OptUint8                          // "uint8"
	OptUint16                         // "uint16"
	OptUint32                         // "uint32"
	OptBool                           // "bool": 0 or 1
	OptStr                            // "str"
	OptHostID                         // "host_id": a name or an IPv4 address
	OptDomains                        // "domains": a comma-separated list of domain names
	OptStaticRoutes                   // "static_routes": {prefix, router, prefix, router, ...}
	OptIPv6                           // "ipv6"
	OptMAC                            // "mac"
	OptDomain                         // "domain": one domain name
)

var optionTypeNames = [...]string{
	OptIPv4: "ipv4", OptUint8: "uint8", OptUint16: "uint16", OptUint32: "uint32",
	OptBool: "bool", OptStr: "str", OptHostID: "host_id", OptDomains: "domains",
	OptStaticRoutes: "static_routes", OptIPv6: "ipv6", OptMAC: "mac", OptDomain: "domain",
}

func (t OptionType) String() string {
	if int(t) < len(optionTypeNames) {
		return optionTypeNames[t]
	}
	return "unknown"
}

// takesString reports whether the option's value must be a quoted string.
func (t OptionType) takesString() bool {
	return t == OptStr || t == OptDomains || t == OptDomain
}

// Option is one option an action takes: its name, its code in the
// protocol (the DHCP option code; -1 for router advertisement settings
// that are flags, not options) and the type of its value.
type Option struct {
	Name string
	Code int
	Type OptionType
}

// dhcpv4Options is read-only: the DHCPv4 options, by code.
var dhcpv4Options = [...]Option{
	{"offerip", 0, OptIPv4},
	{"netmask", 1, OptIPv4},
	{"router", 3, OptIPv4},
	{"dns_server", 6, OptIPv4},
	{"log_server", 7, OptIPv4},
	{"lpr_server", 9, OptIPv4},
	{"hostname", 12, OptStr},
	{"domain_name", 15, OptStr},
	{"swap_server", 16, OptIPv4},
	{"ip_forward_enable", 19, OptBool},
	{"policy_filter", 21, OptIPv4},
	{"default_ttl", 23, OptUint8},
	{"mtu", 26, OptUint16},
	{"broadcast_address", 28, OptIPv4},
	{"router_discovery", 31, OptBool},
	{"router_solicitation", 32, OptIPv4},
	{"arp_cache_timeout", 35, OptUint32},
	{"ethernet_encap", 36, OptBool},
	{"tcp_ttl", 37, OptUint8},
	{"tcp_keepalive_interval", 38, OptUint32},
	{"nis_server", 41, OptIPv4},
	{"ntp_server", 42, OptIPv4},
	{"netbios_name_server", 44, OptIPv4},
	{"netbios_node_type", 46, OptUint8},
	{"lease_time", 51, OptUint32},
	{"server_id", 54, OptIPv4},
	{"T1", 58, OptUint32},
	{"T2", 59, OptUint32},
	{"tftp_server", 66, OptHostID},
	{"bootfile_name", 67, OptStr},
	{"domain_search_list", 119, OptDomains},
	{"classless_static_route", 121, OptStaticRoutes},
	{"tftp_server_address", 150, OptIPv4},
	{"path_prefix", 210, OptStr},
	{"ms_classless_static_route", 249, OptStaticRoutes},
	{"wpad", 252, OptStr},
	{"next_server", 253, OptIPv4},
	{"bootfile_name_alt", 254, OptStr},
}

// dhcpv6Options is read-only: the DHCPv6 options, by code.
var dhcpv6Options = [...]Option{
	{"server_id", 2, OptMAC},
	{"ia_addr", 5, OptIPv6},
	{"dns_server", 23, OptIPv6},
	{"domain_search", 24, OptStr},
}

// raOptions is read-only: put_nd_ra_opts' options. Codes are those of
// the router advertisement's options (RFC 4861, 4191, 8106); addr_mode and
// router_preference set flags of the advertisement itself.
var raOptions = [...]Option{
	{"addr_mode", -1, OptStr},
	{"slla", 1, OptMAC},
	{"prefix", 3, OptIPv6},
	{"mtu", 5, OptUint32},
	{"route_info", 24, OptStr},
	{"rdnss", 25, OptIPv6},
	{"dnssl", 31, OptStr},
	{"router_preference", -1, OptStr},
}

// lbEventOptions is read-only: trigger_event's options for the
// empty_lb_backends event.
var lbEventOptions = [...]Option{
	{"vip", 1, OptStr},
	{"protocol", 2, OptStr},
	{"load_balancer", 3, OptStr},
}

func findOption(opts []Option, name string) (Option, bool) {
	for _, o := range opts {
		if o.Name == name {
			return o, true
		}
	}
	return Option{}, false
}

// DHCPv4Option returns put_dhcp_opts' option called name.
func DHCPv4Option(name string) (Option, bool) { return findOption(dhcpv4Options[:], name) }

// DHCPv6Option returns put_dhcpv6_opts' option called name.
func DHCPv6Option(name string) (Option, bool) { return findOption(dhcpv6Options[:], name) }

// RAOption returns put_nd_ra_opts' option called name.
func RAOption(name string) (Option, bool) { return findOption(raOptions[:], name) }

func lbEventOption(name string) (Option, bool) { return findOption(lbEventOptions[:], name) }

// DHCPv4Options returns a copy of the DHCPv4 options, by code.
func DHCPv4Options() []Option { return append([]Option(nil), dhcpv4Options[:]...) }

// DHCPv6Options returns a copy of the DHCPv6 options, by code.
func DHCPv6Options() []Option { return append([]Option(nil), dhcpv6Options[:]...) }
