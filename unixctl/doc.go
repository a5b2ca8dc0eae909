// Package unixctl is the control socket of govn's daemons: the protocol
// ovs-appctl speaks, so that both the real ovs-appctl and "govn appctl"
// can drive "govn switch" and "govn db".
//
// # Protocol
//
// A client connects to a unix socket and sends JSON-RPC 1.0 requests
// (package ovsdb/jsonrpc): the method is a command name such as
// "dpctl/dump-flows" and the params are the command's arguments, all
// strings. A success is answered with the command's output text as the
// result; a failure with the error text as the error. ovs-appctl prints
// the result to stdout, or the error to stderr and exits with status 2.
//
// # Server
//
// A daemon builds a map from command names to Commands and calls Serve
// with a listener from Listen. "list-commands" is built in unless the map
// defines it. Commands run on the goroutine reading their connection, so
// commands of different clients run concurrently and must be safe for
// that; a command should be quick, as its client waits for it.
//
// A command that stops the daemon (like "exit") cancels Serve's context;
// Serve then stops accepting, lets the commands running finish and sends
// their replies before closing the connections, so the client that asked
// for "exit" gets its answer.
package unixctl
