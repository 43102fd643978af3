package main

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckVersion(t *testing.T) {
	cases := []struct {
		in   string
		want string // "" when valid
	}{
		{in: "v0.1.0"},
		{in: "v1.20.300"},
		{in: "v1.2.0-rc.1"},
		{in: "v0.1.0-rehearsal.1764345678.4242"},
		{in: "", want: "VERSION is missing"},
		{in: "1.2", want: `VERSION "1.2" is not a release version: want vMAJOR.MINOR.PATCH, as v1.2.0`},
		{in: "v1.2", want: "as v1.2.0"},
		{in: "v1", want: "as v1.0.0"},
		{in: "v1.2.3.4", want: "as v1.2.3"},
		{in: "1.2.3", want: "as v1.2.3"},
		{in: "x", want: "as v0.1.0"},
		{in: "V1.2.3", want: "not a release version"},
		{in: "v01.2.3", want: "not a release version"},
		{in: "v1.2.3+build", want: "not a release version"},
		{in: "v1.2.3-", want: "not a release version"},
		{in: "v1.2.3-rc..1", want: "not a release version"},
		{in: " v1.2.3", want: "not a release version"},
		{in: "v1.2.3\n", want: "not a release version"},
		{in: "grpc/v1.2.3", want: "not a release version"},
		{in: "v" + strings.Repeat("1", 1<<16) + ".0.0", want: "not a release version"},
	}
	for _, c := range cases {
		err := checkVersion(c.in)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("checkVersion(%.20q): %v, want nil", c.in, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("checkVersion(%.20q): %v, want %q", c.in, err, c.want)
		case err != nil && len(err.Error()) > 200:
			t.Errorf("checkVersion(%.20q): a message of %d bytes", c.in, len(err.Error()))
		}
	}
}

func TestVersionTags(t *testing.T) {
	tags := []string{"grpc/v0.2.0", "v0.1.0", "v0.10.0", "v0.2.0", "v0.2.1-rc.1", "latest", "v0.9.0", "redis/v0.10.0"}
	got := versionTags(tags)
	want := []string{"v0.10.0", "v0.9.0", "v0.2.1-rc.1", "v0.2.0", "v0.1.0"}
	if !slices.Equal(got, want) {
		t.Errorf("versionTags = %v, want %v", got, want)
	}
	cases := []struct {
		versions     []string
		newest, next string
	}{
		{versions: nil, newest: "", next: "v0.1.0"},
		{versions: []string{"v0.3.0-rc.1"}, newest: "", next: "v0.1.0"},
		{versions: []string{"v0.3.0-rc.1", "v0.2.4"}, newest: "v0.2.4", next: "v0.3.0"},
		{versions: want, newest: "v0.10.0", next: "v0.11.0"},
		{versions: []string{"v1.4.2"}, newest: "v1.4.2", next: "v1.5.0"},
	}
	for _, c := range cases {
		if got := newestRelease(c.versions); got != c.newest {
			t.Errorf("newestRelease(%v) = %q, want %q", c.versions, got, c.newest)
		}
		if got := nextMinor(c.versions); got != c.next {
			t.Errorf("nextMinor(%v) = %q, want %q", c.versions, got, c.next)
		}
	}
}

func TestMayBreak(t *testing.T) {
	cases := []struct {
		prev, next string
		bump       bump
		mayBreak   bool
	}{
		{prev: "", next: "v0.1.0", bump: bumpMinor, mayBreak: true},
		{prev: "v0.1.0", next: "v0.1.1", bump: bumpPatch, mayBreak: false},
		{prev: "v0.1.3", next: "v0.2.0", bump: bumpMinor, mayBreak: true},
		{prev: "v0.2.0", next: "v0.2.1-rc.1", bump: bumpPatch, mayBreak: false},
		{prev: "v0.9.0", next: "v1.0.0", bump: bumpMajor, mayBreak: true},
		{prev: "v1.0.0", next: "v1.1.0", bump: bumpMinor, mayBreak: false},
		{prev: "v1.4.0", next: "v1.4.1", bump: bumpPatch, mayBreak: false},
		{prev: "v1.4.0", next: "v2.0.0", bump: bumpMajor, mayBreak: true},
	}
	for _, c := range cases {
		if got := bumpOf(c.prev, c.next); got != c.bump {
			t.Errorf("bumpOf(%q, %q) = %v, want %v", c.prev, c.next, got, c.bump)
		}
		if got := mayBreak(c.prev, c.next); got != c.mayBreak {
			t.Errorf("mayBreak(%q, %q) = %v, want %v", c.prev, c.next, got, c.mayBreak)
		}
	}
}

// TestCheckAPI: which changes a version's number allows.
func TestCheckAPI(t *testing.T) {
	breaking := []apiChange{{Module: "grpc", Message: "F: removed"}}
	added := []apiChange{{Module: ".", Message: "G: added", Compatible: true}}
	cases := []struct {
		prev, next string
		changes    []apiChange
		want       string // "" when allowed
	}{
		{prev: "v0.1.0", next: "v0.1.1"},
		{prev: "v0.1.0", next: "v0.1.1", changes: added, want: "v0.1.1 is a patch release, but the API grew since v0.1.0 (G: added)"},
		{prev: "v0.1.0", next: "v0.1.1", changes: breaking, want: "changed incompatibly since v0.1.0 (grpc: F: removed): that takes a new minor version"},
		{prev: "v0.1.0", next: "v0.2.0", changes: append(breaking, added...)},
		{prev: "v1.0.0", next: "v1.1.0", changes: added},
		{prev: "v1.0.0", next: "v1.1.0", changes: append(breaking, breaking...), want: "(grpc: F: removed, and 1 more): that takes a new major version"},
		{prev: "v1.0.0", next: "v1.0.1", changes: breaking, want: "v1.0.1 is a patch release"},
		{prev: "v1.3.0", next: "v2.0.0", changes: breaking},
	}
	for _, c := range cases {
		err := checkAPI(c.prev, c.next, c.changes)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("checkAPI(%s, %s, %v) = %v, want %q", c.prev, c.next, c.changes, err, c.want)
		}
	}
}
