// Package debugstats lets package retryz read what package retry keeps
// and does not export, so that retry's exported API stays small: retry
// sets the functions as it starts.
package debugstats

// TransportStats returns the retry.Stats of a *retry.Transport, nil
// included, as an any.
var TransportStats func(transport any) any
