// Package sb holds typed models of OVN's Southbound database (OVN_Southbound), generated
// from ovn-sb.ovsschema by ovsdb/modelgen: one struct per table, convertible
// to and from ovsdb.Row and usable with the client cache (client.Get,
// client.List) and transactions (Txn.InsertModel).
package sb

//go:generate go run ../../ovsdb/modelgen -package sb -o model_gen.go ovn-sb.ovsschema
