// Command modelgen generates typed Go models from an OVSDB schema: one
// struct per table with a field per column, conversion to and from
// ovsdb.Row, and constants for table names and enumerated values. The
// generated code holds only what differs per table (each struct lists its
// fields' columns); the conversions themselves are package ovsdb/model. The
// structs satisfy client.Model, so the client cache can hand out typed rows
// (client.Get, client.List) and transactions can take them (Txn.InsertModel).
//
// Usage, from a //go:generate line next to the schema:
//
//	go run github.com/govn/govn/ovsdb/modelgen -package nb -o model_gen.go ovn-nb.ovsschema
//
// Column types map to Go types as follows: a scalar column (exactly one
// value) to the atom's Go type (int64, float64, bool, string, ovsdb.UUID);
// an optional column (0 or 1 values) to a pointer; any other set to a slice
// sorted as OVSDB sorts it; a map to a Go map.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	pkg := flag.String("package", "", "Go package name of the generated file (required)")
	out := flag.String("o", "model_gen.go", "output file; - for standard output")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: modelgen -package NAME [-o FILE] SCHEMA.ovsschema")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *pkg == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*pkg, flag.Arg(0), *out); err != nil {
		fmt.Fprintln(os.Stderr, "modelgen:", err)
		os.Exit(1)
	}
}

func run(pkg, schemaFile, out string) error {
	data, err := os.ReadFile(schemaFile)
	if err != nil {
		return err
	}
	src, err := Generate(pkg, data)
	if err != nil {
		return fmt.Errorf("%s: %w", schemaFile, err)
	}
	if out == "-" {
		_, err = os.Stdout.Write(src)
		return err
	}
	return os.WriteFile(out, src, 0o644)
}
