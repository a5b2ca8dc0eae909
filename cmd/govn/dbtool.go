package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/cluster"
	"github.com/govn/govn/ovsdb/server"
	"github.com/govn/govn/ovsdb/storage"
	"github.com/govn/govn/schema"
)

// The offline database commands of "govn db", after ovsdb-tool(1):
//
//	govn db convert FILE SCHEMA [TARGET]
//	govn db needs-conversion FILE SCHEMA
//	govn db db-version FILE
//	govn db schema-version SCHEMA
//
// SCHEMA is nb, sb, vswitch (govn's embedded schemas) or an .ovsschema file.
const dbToolUsage = `govn db convert FILE SCHEMA [TARGET]
       govn db needs-conversion FILE SCHEMA
       govn db db-version FILE
       govn db schema-version SCHEMA
       govn db db-is-clustered|db-is-standalone|db-name|db-cid|db-sid|db-local-address FILE
  SCHEMA: nb, sb, vswitch or an .ovsschema file`

// schemaNames says what a SCHEMA argument may be.
const schemaNames = "nb, sb, vswitch or an .ovsschema file"

// dbToolCommands are the offline commands as nodes of the command tree.
func dbToolCommands() []*command {
	tool := func(name, usage, summary string, lo, hi int) *command {
		return &command{name: name, usage: usage, summary: summary, minArgs: lo, maxArgs: hi,
			setup: noFlags(func(ctx context.Context, s stdio, args []string) error {
				return runDBTool(ctx, s.out, append([]string{name}, args...))
			})}
	}
	return []*command{
		tool("convert", "FILE SCHEMA [TARGET]", "convert FILE's data to SCHEMA, in place or into TARGET (like ovsdb-tool convert)", 2, 3),
		tool("needs-conversion", "FILE SCHEMA", "print yes if FILE's schema differs from SCHEMA, no if not", 2, 2),
		tool("db-version", "FILE", "print the version of FILE's schema", 1, 1),
		tool("schema-version", "SCHEMA", "print the version of SCHEMA ("+schemaNames+")", 1, 1),
		tool("db-is-clustered", "FILE", "exit 0 if FILE is a clustered database, 2 if not (like ovsdb-tool)", 1, 1),
		tool("db-is-standalone", "FILE", "exit 0 if FILE is a standalone database, 2 if not", 1, 1),
		tool("db-name", "FILE", "print the name of FILE's database", 1, 1),
		tool("db-cid", "FILE", "print the cluster id of clustered FILE", 1, 1),
		tool("db-sid", "FILE", "print the server id of clustered FILE", 1, 1),
		tool("db-local-address", "FILE", "print the peer address of clustered FILE's server", 1, 1),
	}
}

// runDBTool runs the offline command args[0] with its arguments, writing
// its answer to out.
func runDBTool(ctx context.Context, out io.Writer, args []string) error {
	usage := func() error { return fmt.Errorf("%w: %s", errUsage, dbToolUsage) }
	switch args[0] {
	case "convert":
		if len(args) != 3 && len(args) != 4 {
			return usage()
		}
		text, err := readSchema(args[2])
		if err != nil {
			return err
		}
		target := ""
		if len(args) == 4 {
			target = args[3]
		}
		return server.ConvertFile(ctx, args[1], target, text)
	case "needs-conversion":
		if len(args) != 3 {
			return usage()
		}
		have, _, err := storage.ReadFile(args[1])
		if err != nil {
			return err
		}
		want, err := readSchema(args[2])
		if err != nil {
			return err
		}
		same, err := ovsdb.SchemasEqual(have, want)
		if err != nil {
			return err
		}
		answer := "yes"
		if same {
			answer = "no"
		}
		_, err = fmt.Fprintln(out, answer)
		return err
	case "db-version":
		if len(args) != 2 {
			return usage()
		}
		text, _, err := storage.ReadFile(args[1])
		if err != nil {
			return err
		}
		return printVersion(out, text, args[1])
	case "db-is-clustered", "db-is-standalone":
		if len(args) != 2 {
			return usage()
		}
		if _, err := os.Stat(args[1]); err != nil {
			return err
		}
		if cluster.IsClusterFile(args[1]) != (args[0] == "db-is-clustered") {
			return errCommandFailed // exit status 2, as ovsdb-tool's "no"
		}
		return nil
	case "db-name", "db-cid", "db-sid", "db-local-address":
		if len(args) != 2 {
			return usage()
		}
		if !cluster.IsClusterFile(args[1]) {
			if args[0] == "db-name" {
				text, _, err := storage.ReadFile(args[1])
				if err != nil {
					return err
				}
				s, err := ovsdb.ParseSchema(text)
				if err != nil {
					return fmt.Errorf("%s: %w", args[1], err)
				}
				_, err = fmt.Fprintln(out, s.Name)
				return err
			}
			return fmt.Errorf("%s: not a clustered database", args[1])
		}
		info, err := cluster.ReadInfo(args[1])
		if err != nil {
			return err
		}
		v := map[string]string{"db-name": info.Name, "db-cid": info.CID, "db-sid": info.SID, "db-local-address": info.Local}[args[0]]
		if v == "" {
			return fmt.Errorf("%s: cluster id not yet known (the server has not joined)", args[1])
		}
		_, err = fmt.Fprintln(out, v)
		return err
	case "schema-version":
		if len(args) != 2 {
			return usage()
		}
		text, err := readSchema(args[1])
		if err != nil {
			return err
		}
		return printVersion(out, text, args[1])
	}
	return usage()
}

// printVersion prints the version of the schema document text (from
// source, for errors).
func printVersion(out io.Writer, text []byte, source string) error {
	s, err := ovsdb.ParseSchema(text)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	_, err = fmt.Fprintln(out, s.Version)
	return err
}

// readSchema returns the text of a named embedded schema or a schema file.
// A name that is neither gets an error listing the names.
func readSchema(name string) ([]byte, error) {
	switch name {
	case "nb", "sb", "vswitch":
		text, err := schema.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("reading schema %s: %w", name, err)
		}
		return text, nil
	}
	text, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no schema %q: want %s", name, schemaNames)
	}
	if err != nil {
		return nil, fmt.Errorf("reading schema %s: %w", name, err)
	}
	return text, nil
}

// closeDBLog closes the log a served database was opened with and, when
// an online conversion has since replaced it (see server.ConvertDatabase),
// the one in use, so that every submitted commit reaches the file.
func closeDBLog(srv *server.Server, name string, opened io.Closer) {
	if cur, ok := srv.DatabaseLog(name).(io.Closer); ok && cur != opened {
		cur.Close()
	}
	opened.Close()
}
