package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"testing"
)

// TestBuildVersion: the stamped version wins, then the module version that
// go install records, then "(devel)".
func TestBuildVersion(t *testing.T) {
	cases := []struct {
		name    string
		stamped string
		info    *debug.BuildInfo
		ok      bool
		want    string
	}{
		{name: "stamped", stamped: "v1.2.3", info: &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}, ok: true, want: "v1.2.3"},
		{name: "go install @version", info: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.1"}}, ok: true, want: "v0.4.1"},
		{name: "built in a clone", info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, ok: true, want: "(devel)"},
		{name: "no module version", info: &debug.BuildInfo{}, ok: true, want: "(devel)"},
		{name: "no build info", want: "(devel)"},
		{name: "nil info said ok", ok: true, want: "(devel)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := buildVersion(c.stamped, c.info, c.ok); got != c.want {
				t.Errorf("buildVersion(%q, %+v, %v) = %q, want %q", c.stamped, c.info, c.ok, got, c.want)
			}
		})
	}
}

// TestVersionFlag: retry --version prints one line, "retry " and the
// version, and exits 0; a test binary has no stamp and no module version.
func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}} {
		stdout, stderr, code := cli(t, "", args...)
		if code != 0 || stderr != "" || stdout != "retry (devel)\n" {
			t.Errorf("%v: status %d, stderr %q, stdout %q; want 0, \"\", \"retry (devel)\\n\"", args, code, stderr, stdout)
		}
	}
}

// TestStampedVersion: a build stamped as the release builds stamp it (the
// -X flag of .goreleaser.yaml's ldflags) prints that version.
func TestStampedVersion(t *testing.T) {
	config, err := os.ReadFile(filepath.Join("..", "..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-X main\.version=(\S*)\{\{ \.Version \}\}`).FindSubmatch(config)
	if m == nil {
		t.Fatal(".goreleaser.yaml's ldflags do not stamp main.version with {{ .Version }}")
	}
	stamp := "main.version=" + string(m[1]) + "9.8.7" // goreleaser's .Version has no v
	bin := filepath.Join(t.TempDir(), "retry")
	build := exec.Command("go", "build", "-ldflags", "-X "+stamp, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || string(out) != "retry v9.8.7\n" {
		t.Errorf("retry --version: %q, %v; want \"retry v9.8.7\\n\"", out, err)
	}
}
