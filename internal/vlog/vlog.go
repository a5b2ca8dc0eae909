// Package vlog is a log/slog handler that writes records the way Open
// vSwitch daemons write their log files (vlog's default file format), so
// that operators' tools and eyes that read ovn-northd.log read govn's:
//
//	2026-12-01T21:18:37.123Z|00042|northd|INFO|connected to both databases nb=unix:/run/ovn/nb.sock
//
// time in UTC to the millisecond, a sequence number, the module, the level
// (DBG, INFO, WARN, ERR) and the message followed by its attributes as
// key=value (values quoted when they need it, as slog's text handler does).
package vlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Handler writes vlog-formatted records to a writer. It is safe for
// concurrent use; handlers derived with WithAttrs and WithGroup share the
// writer and the sequence numbers.
type Handler struct {
	module string
	level  slog.Leveler
	prefix string // preformatted attributes of WithAttrs
	group  string // key prefix of WithGroup
	out    *output
}

type output struct {
	mu  sync.Mutex
	w   io.Writer
	seq uint64
}

// New returns a Handler writing to w for module, logging records at level
// or above (nil: info).
func New(w io.Writer, module string, level slog.Leveler) *Handler {
	if level == nil {
		level = slog.LevelInfo
	}
	return &Handler{module: module, level: level, out: &output{w: w}}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

// levelName is vlog's name of a level.
func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERR"
	case l >= slog.LevelWarn:
		return "WARN"
	case l >= slog.LevelInfo:
		return "INFO"
	}
	return "DBG"
}

// Handle implements slog.Handler.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.prefix)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.group, a)
		return true
	})
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.seq++
	_, err := fmt.Fprintf(h.out.w, "%s|%05d|%s|%s|%s\n", t.UTC().Format("2006-01-02T15:04:05.000Z"),
		h.out.seq, h.module, levelName(r.Level), strings.ReplaceAll(b.String(), "\n", " "))
	return err
}

// appendAttr writes " key=value", groups as dotted keys.
func appendAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			appendAttr(b, key, g)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(key)
	b.WriteByte('=')
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " =\"\t\n") {
		v = strconv.Quote(v)
	}
	b.WriteString(v)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	for _, a := range attrs {
		appendAttr(&b, h.group, a)
	}
	n := *h
	n.prefix += b.String()
	return &n
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	if n.group != "" {
		name = n.group + "." + name
	}
	n.group = name
	return &n
}
