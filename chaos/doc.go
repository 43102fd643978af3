// Package chaos is under construction.
package chaos
