package retry

// Options joins opts into one Option that applies them in order, for
// packages that hand out several hooks at once (such as the otel module's
// Metrics.Option). A *Retrier among opts is skipped: its shared state only
// joins a call or a Retrier when it is passed to Do, New or NewTransport
// itself.
func Options(opts ...Option) Option {
	opts = append([]Option(nil), opts...)
	return optionFunc(func(c *config) {
		for _, o := range opts {
			if _, ok := o.(*Retrier); !ok && o != nil {
				o.apply(c)
			}
		}
	})
}
