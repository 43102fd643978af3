package main

import (
	"fmt"
	"os/exec"
	"strings"
)

// gitOutput runs git in dir and returns its standard output; its error
// says what git said.
func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// gitRun runs git in dir.
func gitRun(dir string, args ...string) error {
	_, err := gitOutput(dir, args...)
	return err
}

// gitLines returns the non-empty lines git prints.
func gitLines(dir string, args ...string) ([]string, error) {
	out, err := gitOutput(dir, args...)
	if err != nil {
		return nil, err
	}
	var lines []string
	for l := range strings.Lines(out) {
		if l = strings.TrimRight(l, "\n"); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}
