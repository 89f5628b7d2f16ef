package main

import (
	"context"
	"io"
	"log/slog"
	"slices"
)

// newLogHandler returns the chaperone's log handler: JSON records on w, each
// attribute key at most once per record (see uniqueAttrs).
func newLogHandler(w io.Writer, level slog.Leveler) slog.Handler {
	return &uniqueAttrs{base: slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})}
}

// uniqueAttrs is a slog.Handler that writes every attribute key once per
// record. slog's own handlers write a key as often as it was added: a
// package that names itself with With("component", "routingsync") under a
// logger that already has a component gave records with two "component"
// keys, which JSON log pipelines resolve differently (first, last, error).
// Here the innermost value wins: a With replaces an earlier With of the same
// key, and an attribute of the log call replaces both.
//
// Groups (WithGroup) are passed to the base handler after the attributes
// collected so far: keys are unique within each group level.
type uniqueAttrs struct {
	base  slog.Handler
	attrs []slog.Attr // from With, in order, keys unique
}

func (h *uniqueAttrs) Enabled(ctx context.Context, l slog.Level) bool {
	return h.base.Enabled(ctx, l)
}

func (h *uniqueAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return &uniqueAttrs{base: h.base, attrs: mergeAttrs(slices.Clone(h.attrs), as)}
}

func (h *uniqueAttrs) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &uniqueAttrs{base: h.base.WithAttrs(h.attrs).WithGroup(name)}
}

func (h *uniqueAttrs) Handle(ctx context.Context, r slog.Record) error {
	if len(h.attrs) == 0 && r.NumAttrs() <= 1 {
		return h.base.Handle(ctx, r)
	}
	as := slices.Clone(h.attrs)
	rec := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool { rec = append(rec, a); return true })
	as = mergeAttrs(as, rec)
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(as...)
	return h.base.Handle(ctx, out)
}

// mergeAttrs appends add to dst; an attribute whose key dst already has
// replaces that one in place. Empty attributes (slog drops them) are
// skipped.
func mergeAttrs(dst, add []slog.Attr) []slog.Attr {
	for _, a := range add {
		if a.Equal(slog.Attr{}) {
			continue
		}
		if i := slices.IndexFunc(dst, func(b slog.Attr) bool { return b.Key == a.Key }); i >= 0 {
			dst[i] = a
			continue
		}
		dst = append(dst, a)
	}
	return dst
}

// atLevel logs every record at one level: client-go's messages, which
// repeat for every retry of a failed watch, at DEBUG.
type atLevel struct {
	slog.Handler
	level slog.Level
}

func (h atLevel) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.Handler.Enabled(ctx, h.level)
}

func (h atLevel) Handle(ctx context.Context, r slog.Record) error {
	r.Level = h.level
	return h.Handler.Handle(ctx, r)
}

func (h atLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return atLevel{h.Handler.WithAttrs(as), h.level}
}

func (h atLevel) WithGroup(name string) slog.Handler {
	return atLevel{h.Handler.WithGroup(name), h.level}
}
