package schema

import (
	"embed"
	"fmt"
	"slices"
	"strings"
)

// files are the embedded schemas, keyed by their short name in byName.
//
//go:embed nb/ovn-nb.ovsschema sb/ovn-sb.ovsschema vswitch/vswitch.ovsschema
var files embed.FS

// byName maps a short schema name to its embedded file.
var byName = map[string]string{
	"nb":      "nb/ovn-nb.ovsschema",
	"sb":      "sb/ovn-sb.ovsschema",
	"vswitch": "vswitch/vswitch.ovsschema",
}

// Names returns the short names of the embedded schemas, sorted:
// "nb", "sb", "vswitch".
func Names() []string {
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Lookup returns a fresh copy of the embedded schema called name ("nb",
// "sb" or "vswitch"), as the JSON text of an RFC 7047 <database-schema>.
func Lookup(name string) ([]byte, error) {
	path, ok := byName[name]
	if !ok {
		return nil, fmt.Errorf("no embedded schema %q (have %s)", name, strings.Join(Names(), ", "))
	}
	b, err := files.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read embedded schema %q: %w", name, err)
	}
	return b, nil
}

// MustLookup is Lookup for the names in Names, which cannot fail; it panics
// on any other name, so use it only with constants.
func MustLookup(name string) []byte {
	b, err := Lookup(name)
	if err != nil {
		panic(err)
	}
	return b
}
