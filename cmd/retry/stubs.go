package main

import (
	"os"

	"github.com/spf13/cobra"
)

func newDemo(e *env) *cobra.Command       { return &cobra.Command{Use: "demo"} }
func newRun(e *env) *cobra.Command        { return &cobra.Command{Use: "run"} }
func newGet(e *env) *cobra.Command        { return &cobra.Command{Use: "get"} }
func forwardSignals(p *os.Process) func() { return func() {} }
