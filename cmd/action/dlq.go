package main

import "github.com/spf13/cobra"

func init() { registerCommand("dlq", newDLQCommand) }

func newDLQCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect, analyse, export and redrive the dead letter queue",
	}
	for _, name := range sortedKeys(dlqRegistry) {
		cmd.AddCommand(dlqRegistry[name](a))
	}
	return cmd
}
