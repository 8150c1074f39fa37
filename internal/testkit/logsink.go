package testkit

import (
	"context"
	"log/slog"
	"slices"
	"sync"
)

// LogSink is a slog handler that keeps every message, at every level, for a
// test to look for one. Safe for concurrent use.
type LogSink struct {
	mu   sync.Mutex
	msgs []string
}

// Enabled reports true: the sink keeps every level.
func (s *LogSink) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps r's message.
func (s *LogSink) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	s.msgs = append(s.msgs, r.Message)
	s.mu.Unlock()
	return nil
}

// WithAttrs returns s: attributes are not kept.
func (s *LogSink) WithAttrs([]slog.Attr) slog.Handler { return s }

// WithGroup returns s: groups are not kept.
func (s *LogSink) WithGroup(string) slog.Handler { return s }

// Has reports whether a message equal to msg was logged.
func (s *LogSink) Has(msg string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.msgs, msg)
}

// Count returns how many messages equal to msg were logged.
func (s *LogSink) Count(msg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.msgs {
		if m == msg {
			n++
		}
	}
	return n
}
