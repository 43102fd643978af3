package main

import "github.com/spf13/cobra"

func newDemo(e *env) *cobra.Command { return &cobra.Command{Use: "demo"} }
