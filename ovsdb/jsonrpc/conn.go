package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// DefaultMaxBacklog is how many unsent bytes a Conn queues before it gives
// up on a peer that does not read.
const DefaultMaxBacklog = 512 << 20

// ErrClosed is returned (wrapped) by operations on a Conn that has ended.
var ErrClosed = errors.New("jsonrpc: connection closed")

// ErrBacklog is the cause of a Conn closed because its peer did not read
// fast enough.
var ErrBacklog = errors.New("jsonrpc: peer is not reading; send backlog exceeded")

// Handler is called for each incoming request and notification, on the
// Conn's reader goroutine (see the package documentation for the contract).
// ctx is cancelled when the Conn ends.
type Handler func(ctx context.Context, c *Conn, m *Message)

// Options configure a Conn. The zero value is usable.
type Options struct {
	Handler        Handler
	MaxMessageSize int          // largest incoming message; DefaultMaxMessageSize if 0
	MaxBacklog     int          // most unsent bytes before closing; DefaultMaxBacklog if 0
	Logger         *slog.Logger // slog.Default() if nil
	// FlushTimeout bounds how long Close waits for queued messages to be
	// written (only for transports with write deadlines); 2s if 0.
	FlushTimeout time.Duration
	// CancelAbandoned makes a call whose context ends before its response
	// send OVSDB's "cancel" notification for the call's id (RFC 7047
	// §4.1.4), so the peer stops work it would otherwise finish (a
	// transaction blocked in "wait" would commit later). The peer's
	// eventual response to the abandoned call is then dropped quietly.
	CancelAbandoned bool
	// InlineWrites lets a sender write the queue to the socket itself, in
	// one non-blocking write, when no write is under way, instead of
	// waking the writer goroutine; what the socket does not take is left
	// to the writer goroutine. It saves a goroutine hand-off per message
	// and works when the transport is a syscall.Conn (a *net.UnixConn or
	// *net.TCPConn); other transports always use the writer goroutine.
	InlineWrites bool
}

// Conn is one JSON-RPC connection, usable by a client or a server.
type Conn struct {
	rwc     io.ReadWriteCloser
	opts    Options
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelCauseFunc
	raw     syscall.RawConn // for inline writes; nil without them
	inline  inlineWrite     // used by the holder of writing
	writeMu sync.Mutex      // guards the send queue below
	pending []byte          // encoded messages not yet handed to the writer
	spare   []byte          // an emptied send buffer, for reuse
	writing bool            // someone (writer goroutine or a sender) is writing
	started bool            // Start has run
	closing bool            // no more sends accepted
	wake    chan struct{}
	written chan struct{} // closed when the writer goroutine has exited

	callMu sync.Mutex
	nextID uint64
	calls  map[string]chan *Message // a nil channel marks an abandoned call

	startOnce sync.Once
	closeOnce sync.Once
	done      chan struct{}
}

// NewConn starts running a connection over rwc: it is New followed by
// Start. The handler may be called before NewConn returns, so a handler
// must use its Conn argument rather than a variable that NewConn's result
// is stored in; code that needs the *Conn stored first uses New and Start.
func NewConn(ctx context.Context, rwc io.ReadWriteCloser, opts Options) *Conn {
	c := New(ctx, rwc, opts)
	c.Start()
	return c
}

// New returns a connection over rwc that does not read, write or call its
// handler until Start. Messages sent before Start are queued. The Conn owns
// rwc and closes it when it ends, which happens on Close, on ctx's
// cancellation, on a transport error or on a malformed incoming message.
func New(ctx context.Context, rwc io.ReadWriteCloser, opts Options) *Conn {
	if opts.MaxBacklog <= 0 {
		opts.MaxBacklog = DefaultMaxBacklog
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = 2 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Conn{
		rwc:     rwc,
		opts:    opts,
		log:     log,
		wake:    make(chan struct{}, 1),
		written: make(chan struct{}),
		calls:   make(map[string]chan *Message),
		done:    make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	if sc, ok := rwc.(syscall.Conn); ok && opts.InlineWrites {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
			c.inline.step = c.inline.write
		}
	}
	return c
}

// Start starts the reader and writer goroutines. Calling it again does
// nothing.
func (c *Conn) Start() {
	c.startOnce.Do(func() {
		c.writeMu.Lock()
		c.started = true
		c.writeMu.Unlock()
		go c.readLoop()
		go c.writeLoop()
		go func() {
			<-c.ctx.Done()
			c.shutdown(context.Cause(c.ctx))
		}()
	})
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (nil while it runs). It is
// ErrClosed after Close, io.EOF when the peer hung up cleanly.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return context.Cause(c.ctx)
	default:
		return nil
	}
}

// Context returns a context cancelled when the connection ends.
func (c *Conn) Context() context.Context { return c.ctx }

// Close ends the connection after trying briefly to write what is queued.
func (c *Conn) Close() error {
	c.Start() // the goroutines do the closing
	c.cancel(ErrClosed)
	<-c.done
	return nil
}

// fail ends the connection because of err.
func (c *Conn) fail(err error) { c.cancel(err) }

// shutdown runs once the context is cancelled: it lets the writer flush,
// closes the transport (which stops the reader) and fails pending calls.
func (c *Conn) shutdown(cause error) {
	c.closeOnce.Do(func() {
		c.writeMu.Lock()
		c.closing = true
		c.writeMu.Unlock()
		c.signalWriter()
		if d, ok := c.rwc.(interface{ SetWriteDeadline(time.Time) error }); ok && !errors.Is(cause, ErrBacklog) {
			_ = d.SetWriteDeadline(time.Now().Add(c.opts.FlushTimeout))
			<-c.written
		}
		_ = c.rwc.Close()
		<-c.written
		c.callMu.Lock()
		for id, ch := range c.calls {
			if ch != nil { // nil: abandoned, nobody waits
				close(ch)
			}
			delete(c.calls, id)
		}
		c.callMu.Unlock()
		close(c.done)
	})
}

func (c *Conn) signalWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// enqueue appends one encoded message to the send queue and sends it.
func (c *Conn) enqueue(m *Message) error {
	c.writeMu.Lock()
	if c.closing {
		c.writeMu.Unlock()
		return c.closedErr()
	}
	before := len(c.pending)
	c.pending = m.appendJSON(c.pending)
	return c.queuedLocked(before, true)
}

// QueueNotification queues a notification whose params are the
// concatenation of params (which must make one JSON array) without
// sending it; Flush sends it. It lets a sender that notifies many Conns
// under a lock do the writing after releasing the lock.
func (c *Conn) QueueNotification(method string, params ...[]byte) error {
	c.writeMu.Lock()
	if c.closing {
		c.writeMu.Unlock()
		return c.closedErr()
	}
	before := len(c.pending)
	b := append(c.pending, `{"id":null,"method":`...)
	b = appendJSONString(b, method)
	b = append(b, `,"params":`...)
	for _, p := range params {
		b = append(b, p...)
	}
	c.pending = append(b, '}')
	return c.queuedLocked(before, false)
}

// queuedLocked finishes queueing a message that grew the queue from
// before bytes: it releases writeMu, ends the connection if the backlog is
// too long and, if flush, starts sending.
func (c *Conn) queuedLocked(before int, flush bool) error {
	over := len(c.pending) > c.opts.MaxBacklog && before > 0
	c.writeMu.Unlock()
	if over {
		c.fail(fmt.Errorf("%w (more than %d bytes)", ErrBacklog, c.opts.MaxBacklog))
		return c.closedErr()
	}
	if flush {
		c.Flush()
	}
	return nil
}

// Flush starts sending what is queued: with Options.InlineWrites it
// writes it at once if no write is under way, otherwise it wakes the
// writer goroutine. It never blocks on the peer.
func (c *Conn) Flush() {
	if c.raw == nil {
		c.signalWriter()
		return
	}
	c.writeMu.Lock()
	if c.writing || !c.started || c.closing || len(c.pending) == 0 {
		c.writeMu.Unlock()
		c.signalWriter()
		return
	}
	c.writing = true
	buf := c.pending
	c.pending = c.spare[:0]
	c.spare = nil
	c.writeMu.Unlock()

	n, err := c.writeNonblocking(buf)

	c.writeMu.Lock()
	c.writing = false
	if n < len(buf) {
		// Put the rest back in front of what was queued meanwhile; the
		// writer goroutine waits for the socket to take it.
		rest := buf[n:]
		if len(c.pending) == 0 {
			// buf is not recycled on this path, so the rest can stay
			// where it is: a big reply is not copied again.
			c.pending = rest
		} else {
			c.pending = append(append(make([]byte, 0, len(rest)+len(c.pending)), rest...), c.pending...)
		}
	} else if c.spare == nil && cap(buf) <= 1<<20 {
		c.spare = buf[:0]
	}
	more := len(c.pending) > 0 || c.closing
	c.writeMu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("jsonrpc: write: %w", err))
	}
	if more {
		c.signalWriter()
	}
}

// writeNonblocking writes as much of b as the socket takes without
// waiting. Only the holder of c.writing calls it.
func (c *Conn) writeNonblocking(b []byte) (int, error) {
	w := &c.inline
	w.buf, w.n, w.err = b, 0, nil
	err := c.raw.Write(w.step)
	n := w.n
	if err == nil {
		err = w.err
	}
	w.buf, w.err = nil, nil
	return n, err
}

// inlineWrite is the state of one writeNonblocking, kept in the Conn so
// that the function handed to syscall.RawConn.Write (step, bound once)
// costs no allocation per write.
type inlineWrite struct {
	buf  []byte
	n    int
	err  error
	step func(fd uintptr) bool
}

func (w *inlineWrite) write(fd uintptr) bool {
	for w.n < len(w.buf) {
		m, err := syscall.Write(int(fd), w.buf[w.n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			if err != syscall.EAGAIN {
				w.err = err
			}
			break
		}
		w.n += m
	}
	return true // never wait: the writer goroutine does that
}

func (c *Conn) closedErr() error {
	if cause := context.Cause(c.ctx); cause != nil && !errors.Is(cause, ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, cause)
	}
	return ErrClosed
}

// writeLoop hands the send queue to the transport, all of it per write.
// A sender writing inline (see Flush) holds c.writing meanwhile and wakes
// the loop when it is done if anything is left.
func (c *Conn) writeLoop() {
	defer close(c.written)
	for {
		<-c.wake
		c.writeMu.Lock()
		if c.writing {
			c.writeMu.Unlock()
			continue
		}
		buf, closing := c.pending, c.closing
		c.pending = c.spare[:0]
		c.spare = nil
		c.writing = len(buf) > 0
		c.writeMu.Unlock()
		if len(buf) > 0 {
			_, err := c.rwc.Write(buf)
			c.writeMu.Lock()
			c.writing = false
			// Keep one buffer for reuse unless a huge message made it huge.
			if c.spare == nil && cap(buf) <= 1<<20 {
				c.spare = buf[:0]
			}
			c.writeMu.Unlock()
			if err != nil {
				c.fail(fmt.Errorf("jsonrpc: write: %w", err))
				return
			}
		}
		c.writeMu.Lock()
		empty := len(c.pending) == 0
		closing = c.closing
		c.writeMu.Unlock()
		if closing && empty {
			return
		}
		if !empty {
			c.signalWriter()
		}
	}
}

// readLoop reads messages until the transport or the peer fails.
func (c *Conn) readLoop() {
	r := NewReader(c.rwc, c.opts.MaxMessageSize)
	for {
		m, err := r.ReadMessage()
		if err != nil {
			if c.ctx.Err() == nil {
				if !errors.Is(err, io.EOF) {
					c.log.Debug("jsonrpc: connection failed", "err", err)
				}
				c.fail(err)
			}
			return
		}
		switch m.Kind() {
		case KindResponse:
			c.deliver(m)
		default:
			if c.opts.Handler == nil {
				if m.Kind() == KindRequest {
					_ = c.ReplyError(m.ID, "unknown method")
				}
				continue
			}
			c.opts.Handler(c.ctx, c, m)
		}
		if c.ctx.Err() != nil {
			return
		}
	}
}

func (c *Conn) deliver(m *Message) {
	key := string(m.ID)
	c.callMu.Lock()
	ch, ok := c.calls[key]
	delete(c.calls, key)
	c.callMu.Unlock()
	switch {
	case !ok:
		c.log.Warn("jsonrpc: dropping response to no outstanding request", "id", key)
	case ch == nil:
		// The response to a call abandoned with a cancel: expected.
	default:
		ch <- m // buffered; the caller may have gone
	}
}

// Send queues m as it is. Its raw members must be valid JSON.
func (c *Conn) Send(m *Message) error { return c.enqueue(m) }

// Notify sends a notification (id null). params is encoded with
// encoding/json (json.RawMessage passes through); nil sends [].
func (c *Conn) Notify(method string, params any) error {
	p, err := marshalParam(params)
	if err != nil {
		return fmt.Errorf("jsonrpc: encoding params of %s: %w", method, err)
	}
	return c.enqueue(&Message{Method: method, Params: p})
}

// Reply sends the successful response to the request with the given id.
func (c *Conn) Reply(id json.RawMessage, result any) error {
	r, err := marshalParam(result)
	if err != nil {
		return fmt.Errorf("jsonrpc: encoding result: %w", err)
	}
	if r == nil {
		r = json.RawMessage("null")
	}
	return c.enqueue(&Message{ID: nonNullID(id), Result: r})
}

// ReplyError sends an error response to the request with the given id.
// OVSDB's errors are objects {"error": NAME, "details": TEXT}; "unknown
// method" is traditionally a bare string.
func (c *Conn) ReplyError(id json.RawMessage, errValue any) error {
	e, err := marshalParam(errValue)
	if err != nil {
		return fmt.Errorf("jsonrpc: encoding error: %w", err)
	}
	if e == nil {
		return errors.New("jsonrpc: an error response needs a non-null error")
	}
	return c.enqueue(&Message{ID: nonNullID(id), Error: e})
}

// nonNullID keeps a response's id from disappearing: JSON-RPC responses
// always carry one.
func nonNullID(id json.RawMessage) json.RawMessage {
	if id == nil {
		return json.RawMessage("null")
	}
	return id
}

// Call sends a request and waits for its response. On success the result
// is decoded into result (unless result is nil); an error response is
// returned as *Error.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	raw, err := c.CallRaw(ctx, method, params)
	if err != nil {
		return err
	}
	if result != nil {
		if err := json.Unmarshal(raw, result); err != nil {
			return fmt.Errorf("jsonrpc: decoding result of %s: %w", method, err)
		}
	}
	return nil
}

// CallRaw is Call returning the raw result.
func (c *Conn) CallRaw(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p, err := marshalParam(params)
	if err != nil {
		return nil, fmt.Errorf("jsonrpc: encoding params of %s: %w", method, err)
	}
	ch := make(chan *Message, 1)
	c.callMu.Lock()
	c.nextID++
	id := json.RawMessage(strconv.FormatUint(c.nextID, 10))
	c.calls[string(id)] = ch
	c.callMu.Unlock()
	forget := func() {
		c.callMu.Lock()
		delete(c.calls, string(id))
		c.callMu.Unlock()
	}
	if err := c.enqueue(&Message{Method: method, Params: p, ID: id}); err != nil {
		forget()
		return nil, fmt.Errorf("jsonrpc: %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("jsonrpc: %s: %w", method, c.closedErr())
		}
		if m.Error != nil {
			return nil, &Error{Method: method, Value: m.Error}
		}
		if m.Result == nil {
			return json.RawMessage("null"), nil
		}
		return m.Result, nil
	case <-ctx.Done():
		if !c.opts.CancelAbandoned {
			forget()
			return nil, fmt.Errorf("jsonrpc: %s: %w", method, context.Cause(ctx))
		}
		c.callMu.Lock()
		_, outstanding := c.calls[string(id)]
		if outstanding {
			c.calls[string(id)] = nil // keep the id, so its response is expected
		}
		c.callMu.Unlock()
		if outstanding {
			// The request was queued before this notification, so the
			// peer reads the cancel after the request it names.
			_ = c.Notify("cancel", []json.RawMessage{id})
		}
		return nil, fmt.Errorf("jsonrpc: %s: %w", method, context.Cause(ctx))
	}
}

// RemoteAddr returns the peer's address when the transport is a net.Conn.
func (c *Conn) RemoteAddr() string {
	if nc, ok := c.rwc.(net.Conn); ok && nc.RemoteAddr() != nil {
		return nc.RemoteAddr().String()
	}
	return ""
}
