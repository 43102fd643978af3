package main

import "runtime/debug"

// version is the release this binary was built from when the build stamped
// it (-ldflags "-X main.version=v1.2.3", as the release builds do). Empty
// otherwise.
var version string

// buildVersion returns what retry --version prints: the stamped version;
// else the module's version as go install recorded it
// (go install github.com/steadyhq/retry/cmd/retry@v1.2.3 records v1.2.3);
// else "(devel)", as for a build from a clone.
func buildVersion(stamped string, info *debug.BuildInfo, ok bool) string {
	if stamped != "" {
		return stamped
	}
	if ok && info != nil && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

// currentVersion is buildVersion for this process.
func currentVersion() string {
	info, ok := debug.ReadBuildInfo()
	return buildVersion(version, info, ok)
}
