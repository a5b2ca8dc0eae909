// Package vswitch holds typed models of the Open vSwitch configuration database (Open_vSwitch), generated
// from vswitch.ovsschema by ovsdb/modelgen: one struct per table, convertible
// to and from ovsdb.Row and usable with the client cache (client.Get,
// client.List) and transactions (Txn.InsertModel).
package vswitch

//go:generate go run ../../ovsdb/modelgen -package vswitch -o model_gen.go vswitch.ovsschema
