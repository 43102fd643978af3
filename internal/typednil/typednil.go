// Package typednil tells a nil from a typed nil: an interface that holds a
// nil pointer, map, slice, channel or func, which a nil check of the
// interface does not catch and whose methods would panic.
package typednil

import "reflect"

// Is reports whether v is nil or holds a nil pointer, map, slice, channel,
// func, interface or unsafe pointer.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
