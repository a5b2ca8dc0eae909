// Package nb holds typed models of OVN's Northbound database (OVN_Northbound), generated
// from ovn-nb.ovsschema by ovsdb/modelgen: one struct per table, convertible
// to and from ovsdb.Row and usable with the client cache (client.Get,
// client.List) and transactions (Txn.InsertModel).
package nb

//go:generate go run ../../ovsdb/modelgen -package nb -o model_gen.go ovn-nb.ovsschema
