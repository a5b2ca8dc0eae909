// Package jsonrpc speaks JSON-RPC 1.0 the way OVSDB uses it (RFC 7047 §4),
// for both ends of a connection: govn's OVSDB server sessions and its client.
//
// # Wire format
//
// A connection carries a stream of JSON objects written back to back, with
// no framing and no required separators: a message ends where its closing
// brace is. [Reader] splits such a stream into messages as soon as each one
// is complete (it never waits for a newline), refuses messages larger than a
// configured maximum, and reports a clear error for bytes that cannot be the
// start of a message. Once a Reader has failed, the stream cannot be
// resynchronised and every later call returns the same error.
//
// There are three kinds of [Message]:
//
//   - a request: {"method": M, "params": [...], "id": ID}, answered by exactly
//     one response carrying the same ID; ID may be any JSON value but null;
//   - a notification: {"method": M, "params": [...], "id": null}, never
//     answered;
//   - a response: {"result": R, "error": null, "id": ID} on success or
//     {"result": null, "error": E, "id": ID} on failure.
//
// # Conn
//
// [Conn] runs one connection for either side. Its contract:
//
//   - NewConn starts a reader goroutine and a writer goroutine; the Conn is
//     usable at once and lives until Close, until its context is cancelled,
//     or until the peer or the transport fails. Done is closed then, and Err
//     says why. The handler can run before NewConn returns: it must use the
//     Conn it is given. To store the *Conn somewhere before any message is
//     handled, use New, store it, then Start.
//   - Sending (Call, Notify, Reply, ReplyError, Send) is safe from any number
//     of goroutines and never blocks on the peer: each message is encoded in
//     the caller's goroutine and queued, and the writer goroutine sends the
//     queue in as few writes as possible, in queue order. A peer that stops
//     reading cannot stall the sender; once more than Options.MaxBacklog
//     bytes are queued the connection is closed instead. With
//     Options.InlineWrites a sender writes the queue itself when no write is
//     under way, in one non-blocking write, and leaves only what the socket
//     did not take to the writer goroutine; QueueNotification and Flush let
//     a server queue notifications for many Conns under a lock and write
//     them after releasing it.
//   - Every incoming request and notification is passed to Options.Handler,
//     one at a time, in arrival order, on the reader goroutine. The handler
//     answers requests with Reply/ReplyError, either before returning or
//     later from another goroutine. A handler that blocks stops the reading
//     of everything behind it, replies to its own Calls included: a handler
//     must never wait for a Call on the same Conn.
//   - Nothing is answered automatically, not even "echo": the handler
//     decides. A Conn without a handler answers every request with the error
//     "unknown method" and drops notifications.
//   - Call sends a request with a fresh numeric id and waits for the response
//     with that id, for the context, or for the connection to end. Responses
//     whose id matches no outstanding Call are logged and dropped.
package jsonrpc
