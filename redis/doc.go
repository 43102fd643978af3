// Package redis is under construction.
package redis
