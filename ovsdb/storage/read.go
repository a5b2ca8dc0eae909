package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// ReadFile reads a standalone database file without locking or changing
// it: its schema and every transaction record. If the file has a torn or
// corrupt tail, ReadFile returns the records before it together with an
// error wrapping ErrCorrupt. For inspection and tests; a server uses Open.
func ReadFile(path string) (schema json.RawMessage, records []Record, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	rr := newRecordReader(f, st.Size())
	schema, err = rr.next()
	if err == io.EOF {
		return nil, nil, fmt.Errorf("%s: empty file, not an OVSDB database", path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: schema record: %w", path, err)
	}
	for n := 1; ; n++ {
		body, err := rr.next()
		if err == io.EOF {
			return schema, records, nil
		}
		if err != nil {
			return schema, records, fmt.Errorf("%s: record %d at offset %d: %w", path, n, rr.offset, err)
		}
		rec, err := unmarshalRecord(body)
		if err != nil {
			return schema, records, fmt.Errorf("%s: record %d: %w", path, n, errors.Join(ErrCorrupt, err))
		}
		records = append(records, rec)
	}
}
