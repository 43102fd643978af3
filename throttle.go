package retry

import "context"

// throttles is the adaptive-throttling gate. (Being built: see throttle.go's
// owner.)
type throttles struct{}

func (t *throttles) acts() (admits, enters uint8)     { return 0, 0 }
func (t *throttles) admit(context.Context, ask) grant { return grant{} }
func (t *throttles) enter(context.Context, ask) grant { return grant{} }
func (t *throttles) stats(*Stats)                     {}
