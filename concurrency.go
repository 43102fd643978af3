package retry

import "context"

// concurrency is the adaptive concurrency-limit gate. (Being built.)
type concurrency struct{}

func (l *concurrency) acts() (admits, enters uint8)     { return 0, 0 }
func (l *concurrency) admit(context.Context, ask) grant { return grant{} }
func (l *concurrency) enter(context.Context, ask) grant { return grant{} }
func (l *concurrency) stats(*Stats)                     {}
