package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// quietFor is how long discovery's logger keeps quiet about a record it
// has just logged.
const quietFor = time.Minute

// quietHandler passes a record on once per period for each level, message
// and set of attributes, and drops its repeats in between. file_sd watches
// the directories of its files: a daemon that logs into one of them, next
// to an invalid file, re-read that file at each line it logged about it,
// and logged it again, 21,000 times a second (issue 37). Dropping the
// repeat ends the loop after one line, and a lasting error is still said
// once a period.
func quietHandler(next slog.Handler, period time.Duration) slog.Handler {
	return &quiet{next: next, period: period, seen: &seen{last: map[string]time.Time{}}}
}

type quiet struct {
	next   slog.Handler
	period time.Duration
	seen   *seen
	with   string // the attributes and groups of With and WithGroup, part of the key
}

type seen struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// maxSeen bounds the keys remembered: past it, those older than the period go.
const maxSeen = 1024

func (q *quiet) Enabled(ctx context.Context, l slog.Level) bool { return q.next.Enabled(ctx, l) }

func (q *quiet) Handle(ctx context.Context, r slog.Record) error {
	var key strings.Builder
	fmt.Fprintf(&key, "%s\x00%s\x00%s", q.with, r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&key, "\x00%s=%s", a.Key, a.Value)
		return true
	})
	now := time.Now()
	q.seen.mu.Lock()
	last, ok := q.seen.last[key.String()]
	repeat := ok && now.Sub(last) < q.period
	if !repeat {
		if len(q.seen.last) >= maxSeen {
			for k, t := range q.seen.last {
				if now.Sub(t) >= q.period {
					delete(q.seen.last, k)
				}
			}
			if len(q.seen.last) >= maxSeen { // a flood of distinct records: start over
				clear(q.seen.last)
			}
		}
		q.seen.last[key.String()] = now
	}
	q.seen.mu.Unlock()
	if repeat {
		return nil
	}
	return q.next.Handle(ctx, r)
}

func (q *quiet) WithAttrs(as []slog.Attr) slog.Handler {
	c := *q
	c.next = q.next.WithAttrs(as)
	c.with += fmt.Sprint(as)
	return &c
}

func (q *quiet) WithGroup(name string) slog.Handler {
	c := *q
	c.next = q.next.WithGroup(name)
	c.with += "." + name
	return &c
}
