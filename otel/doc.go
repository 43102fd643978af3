// Package otel is under construction.
package otel
