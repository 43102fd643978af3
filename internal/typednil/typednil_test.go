package typednil

import (
	"net/http"
	"testing"
)

func TestIs(t *testing.T) {
	var mux *http.ServeMux
	var rt http.RoundTripper
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{name: "nil", v: nil, want: true},
		{name: "nil interface", v: rt, want: true},
		{name: "nil pointer", v: mux, want: true},
		{name: "nil func", v: http.HandlerFunc(nil), want: true},
		{name: "nil map", v: map[string]int(nil), want: true},
		{name: "nil slice", v: []int(nil), want: true},
		{name: "nil chan", v: (chan int)(nil), want: true},
		{name: "pointer", v: http.NewServeMux(), want: false},
		{name: "func", v: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), want: false},
		{name: "struct", v: struct{}{}, want: false},
		{name: "zero int", v: 0, want: false},
	}
	for _, tt := range tests {
		if got := Is(tt.v); got != tt.want {
			t.Errorf("%s: Is(%#v) = %v, want %v", tt.name, tt.v, got, tt.want)
		}
	}
}
