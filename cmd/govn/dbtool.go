package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/govn/govn/ovsdb"
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
