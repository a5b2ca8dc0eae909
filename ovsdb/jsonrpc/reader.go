package jsonrpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxMessageSize is the largest message a Reader accepts unless told
// otherwise. ovsdb-server sets no limit, and legitimate messages are large:
// the first Southbound of a 1,000-node ovn-kubernetes cluster is one
// transaction of about 120 MB (284,000 operations), and the monitor update
// that tells every client of it as large. The limit only stops a broken
// peer from growing a buffer without end; the server's budget for large
// requests (ovsdb/server) bounds what decoding them costs.
const DefaultMaxMessageSize = 1 << 30

// maxDepth bounds nesting of arrays and objects. OVSDB messages nest a
// handful of levels; the bound keeps a hostile stream from making the
// decoder recurse without end.
const maxDepth = 1000

// ErrMessageTooLarge is returned (wrapped) by a Reader that meets a message
// longer than its maximum size.
var ErrMessageTooLarge = errors.New("jsonrpc: message too large")

// Reader splits a byte stream into concatenated JSON values, each an object
// or an array. It finds the end of a value by tracking strings and brackets
// while reading, so a value is returned as soon as its last byte arrives.
// It does not check the syntax inside a value beyond bracket matching:
// decoding the returned bytes does that.
type Reader struct {
	r       io.Reader
	maxSize int
	buf     []byte
	start   int // first byte of the current value (or of unscanned input)
	end     int // end of the valid data in buf
	err     error

	// Scanner state for the value starting at start; scan is the next
	// byte to look at.
	scan     int
	inValue  bool
	inString bool
	escaped  bool
	stack    []byte // closing brackets expected, innermost last
}

// NewReader returns a Reader reading from r that refuses values longer than
// maxSize bytes (DefaultMaxMessageSize if maxSize <= 0).
func NewReader(r io.Reader, maxSize int) *Reader {
	if maxSize <= 0 {
		maxSize = DefaultMaxMessageSize
	}
	return &Reader{r: r, maxSize: maxSize}
}

// Next returns the bytes of the next complete JSON value. They stay valid
// only until the following call. At a clean end of stream between values it
// returns io.EOF; an end of stream inside a value is io.ErrUnexpectedEOF. Any
// error is final: later calls return it again.
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		if v, ok, err := r.scanValue(); err != nil {
			r.err = err
			return nil, err
		} else if ok {
			return v, nil
		}
		if err := r.fill(); err != nil {
			if err == io.EOF && r.inValue {
				err = fmt.Errorf("jsonrpc: stream ended inside a message after %d bytes: %w", r.end-r.start, io.ErrUnexpectedEOF)
			}
			r.err = err
			return nil, err
		}
	}
}

// scanValue advances the scanner over buffered bytes and reports a complete
// value if one ends within them.
func (r *Reader) scanValue() (value []byte, ok bool, err error) {
	buf := r.buf[:r.end]
	i := r.scan
	if !r.inValue {
		// Skip whitespace between values; the next byte must open one.
		for i < len(buf) && isSpace(buf[i]) {
			i++
		}
		r.start, r.scan = i, i
		if i == len(buf) {
			return nil, false, nil
		}
		switch buf[i] {
		case '{':
			r.stack = append(r.stack[:0], '}')
		case '[':
			r.stack = append(r.stack[:0], ']')
		default:
			return nil, false, fmt.Errorf("jsonrpc: a message must be a JSON object, but the stream has %q where one should start", buf[i])
		}
		r.inValue, r.inString, r.escaped = true, false, false
		i++
	}
	for ; i < len(buf); i++ {
		if r.inString {
			if r.escaped {
				r.escaped = false
				continue
			}
			// Straight to the string's next quote or backslash: most of
			// a large message is long strings.
			rest := buf[i:]
			end := bytes.IndexByte(rest, '"')
			if end < 0 {
				end = len(rest)
			}
			if bs := bytes.IndexByte(rest[:end], '\\'); bs >= 0 {
				end = bs
			}
			if i += end; i == len(buf) {
				break
			}
			if buf[i] == '\\' {
				r.escaped = true
			} else {
				r.inString = false
			}
			continue
		}
		c := buf[i]
		switch c {
		case '"':
			r.inString = true
		case '{', '[':
			if len(r.stack) >= maxDepth {
				return nil, false, fmt.Errorf("jsonrpc: message nests deeper than %d levels", maxDepth)
			}
			if c == '{' {
				r.stack = append(r.stack, '}')
			} else {
				r.stack = append(r.stack, ']')
			}
		case '}', ']':
			if want := r.stack[len(r.stack)-1]; c != want {
				return nil, false, fmt.Errorf("jsonrpc: malformed message: %q closes a bracket that needs %q", c, want)
			}
			r.stack = r.stack[:len(r.stack)-1]
			if len(r.stack) == 0 {
				value = buf[r.start : i+1]
				if len(value) > r.maxSize {
					return nil, false, r.tooLarge()
				}
				r.inValue = false
				r.start, r.scan = i+1, i+1
				return value, true, nil
			}
		}
	}
	r.scan = i
	if r.end-r.start > r.maxSize {
		return nil, false, r.tooLarge()
	}
	return nil, false, nil
}

func (r *Reader) tooLarge() error {
	return fmt.Errorf("%w: longer than the limit of %d bytes", ErrMessageTooLarge, r.maxSize)
}

// fill reads more input, first moving the unconsumed bytes to the front of
// the buffer and growing it if the current value fills it.
func (r *Reader) fill() error {
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.scan -= r.start
		r.end = n
		r.start = 0
	}
	if r.end == len(r.buf) {
		size := 2 * len(r.buf)
		if size < 4096 {
			size = 4096
		}
		// Never grow far beyond what the size limit can need.
		if limit := r.maxSize + 4096; size > limit && limit > len(r.buf) {
			size = limit
		}
		nb := make([]byte, size)
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	for range 100 {
		n, err := r.r.Read(r.buf[r.end:])
		r.end += n
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// handOffMin is the size from which ReadMessage gives up its buffer to the
// message it returns instead of copying the message.
const handOffMin = 1 << 20

// handOff gives up the buffer, whose bytes before r.start then belong to
// the caller: the unread bytes after them move to a new buffer no larger
// than they need.
func (r *Reader) handOff() {
	rest := r.buf[r.start:r.end]
	nb := make([]byte, max(4096, len(rest)))
	r.end = copy(nb, rest)
	r.scan -= r.start
	r.start = 0
	r.buf = nb
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// ReadMessage returns the next message of the stream, decoded. An error
// here (bad framing, bad JSON, a value that is not a valid message) is final,
// like the errors of Next.
func (r *Reader) ReadMessage() (*Message, error) {
	b, err := r.Next()
	if err != nil {
		return nil, err
	}
	var m *Message
	if len(b) >= handOffMin {
		// Give the buffer to the message rather than copying the message
		// out of it: a large message then costs its size once, not twice,
		// and the connection does not keep a buffer that large.
		r.handOff()
		m, err = parseOwned(b)
	} else {
		m, err = ParseMessage(b)
	}
	if err != nil {
		r.err = err
		return nil, err
	}
	return m, nil
}
