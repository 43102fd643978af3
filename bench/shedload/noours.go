package shedload

// ours is this library's shedding, once package shed exists.
var ours []HTTPServer
