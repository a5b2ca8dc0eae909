package storage

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// maxHeader bounds a header line: "OVSDB JSON ", up to 20 digits, a space,
// 40 hex digits and LF, with room to spare.
const maxHeader = 128

// ErrCorrupt wraps every reason a record is unreadable (cut short, a bad
// header, a SHA-1 mismatch, text that is not a JSON object). Recovery
// treats the first such record as the end of the good part of the file.
var ErrCorrupt = errors.New("corrupt record")

// recordReader reads the records of a standalone file one by one, keeping
// the offset just past the last good record.
type recordReader struct {
	r      *bufio.Reader
	remain int64 // bytes of the file not yet consumed
	offset int64 // offset just past the last complete, valid record
}

func newRecordReader(r io.Reader, size int64) *recordReader {
	return &recordReader{r: bufio.NewReaderSize(r, 64<<10), remain: size}
}

// next returns the JSON text of the next record, io.EOF at a clean end of
// file, or an error wrapping ErrCorrupt for a short, malformed or
// mismatching record (the torn tail a crash leaves). The returned slice is
// the caller's.
func (rr *recordReader) next() ([]byte, error) {
	if rr.remain == 0 {
		return nil, io.EOF
	}
	line, err := rr.r.ReadSlice('\n')
	if err != nil || len(line) > maxHeader {
		if len(line) > maxHeader || errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: header line too long", ErrCorrupt)
		}
		if err == io.EOF {
			return nil, fmt.Errorf("%w: header line cut short (%d bytes)", ErrCorrupt, len(line))
		}
		return nil, fmt.Errorf("read header: %w", err)
	}
	hdrLen := int64(len(line))
	length, sum, err := parseHeader(line[:len(line)-1])
	if err != nil {
		return nil, err
	}
	if length > rr.remain-hdrLen {
		return nil, fmt.Errorf("%w: record of %d bytes, but only %d left in the file", ErrCorrupt, length, rr.remain-hdrLen)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(rr.r, body); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: record cut short", ErrCorrupt)
		}
		return nil, fmt.Errorf("read record: %w", err)
	}
	if sha1.Sum(body) != sum {
		return nil, fmt.Errorf("%w: SHA-1 mismatch", ErrCorrupt)
	}
	body = bytes.TrimRight(body, "\n")
	if !json.Valid(body) || len(body) == 0 || body[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrCorrupt)
	}
	rr.remain -= hdrLen + length
	rr.offset += hdrLen + length
	return body, nil
}

// parseHeader parses "OVSDB JSON <length> <sha1-hex>" (without the LF).
func parseHeader(h []byte) (length int64, sum [sha1.Size]byte, err error) {
	rest, ok := bytes.CutPrefix(h, []byte("OVSDB "))
	if !ok {
		return 0, sum, fmt.Errorf("%w: header %q does not start with \"OVSDB \"", ErrCorrupt, h)
	}
	magic, rest, _ := bytes.Cut(rest, []byte(" "))
	switch string(magic) {
	case magicStandalone:
	case magicClustered:
		return 0, sum, errors.New("clustered database files are not supported; convert with ovsdb-tool cluster-to-standalone")
	default:
		return 0, sum, fmt.Errorf("%w: unknown magic %q in header", ErrCorrupt, magic)
	}
	lenText, hexSum, ok := bytes.Cut(rest, []byte(" "))
	if !ok || len(lenText) == 0 || len(lenText) > 19 || lenText[0] == '0' {
		return 0, sum, fmt.Errorf("%w: bad length in header %q", ErrCorrupt, h)
	}
	for _, c := range lenText {
		if c < '0' || c > '9' {
			return 0, sum, fmt.Errorf("%w: bad length in header %q", ErrCorrupt, h)
		}
	}
	length, err = strconv.ParseInt(string(lenText), 10, 64)
	if err != nil {
		return 0, sum, fmt.Errorf("%w: bad length in header %q", ErrCorrupt, h)
	}
	if len(hexSum) != 2*sha1.Size {
		return 0, sum, fmt.Errorf("%w: bad SHA-1 in header %q", ErrCorrupt, h)
	}
	if _, err := hex.Decode(sum[:], hexSum); err != nil {
		return 0, sum, fmt.Errorf("%w: bad SHA-1 in header %q", ErrCorrupt, h)
	}
	return length, sum, nil
}
