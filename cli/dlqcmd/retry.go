package dlqcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/config"

	"github.com/prodigy-action/prodigy-action/runner"
)

type dlqRetryOptions struct {
	jobID, filter        string
	maxRetries, parallel int
	force, dryRun, json  bool
	maxCost              float64
	claude               config.ClaudeSettings
	workflow, onto       string
	signature            string
	sample, batchSize    int
	agentUser            string
}

func NewDLQRetryCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &dlqRetryOptions{}
	cmd := &cobra.Command{
		Use:   "retry JOB_ID",
		Short: "Re-run DLQ items through the job's real workflow (redrive)",
		Long: `Re-run the job's DLQ records through its workflow: agent template, merge
into the job's results branch, cleanup, then reduce. Only reprocess-eligible
records run unless --force. --filter selects with an expression over item.*
(the record's fields and its item_data), e.g. 'item.priority >= 5',
'item.failure_count < 3', 'item.error_signature contains "Timeout"'.
Successes leave the DLQ; failures stay with their failure_history extended.
Interrupting is safe: records are removed only after success, so running
the command again continues.

The redrive runs the job's workflow file from the checkout (so a fix to it
applies), or --workflow FILE; only when neither exists is the copy stored
with the job used, with a warning. --onto REF merges REF (e.g. main with
the fix) into the results branch first; a conflict changes nothing and
exits 1 naming the conflicting paths. --max-cost-usd sets the job's spend
budget.

--signature SIG redrives only the records whose error_signature is SIG (one
failure cluster; 'dlq analyze' lists them). With --sample N it is a canary:
the first N records of the cluster by item id run first; if all N fail again
with the same signature it stops (exit 1) without running the rest, else the
rest of the cluster runs. --dry-run shows which items are the sample and
which the rest.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.jobID = args[0]
			return runDLQRetry(cmd.Context(), f, opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.filter, "filter", "", "expression selecting records (over item.*)")
	fs.IntVar(&opts.maxRetries, "max-retries", 3, "attempts per item, with the workflow's backoff")
	fs.IntVar(&opts.parallel, "parallel", 10, "agents at once (alias --max-parallel)")
	cmdutil.AliasFlags(fs, map[string]string{"max-parallel": "parallel"})
	fs.BoolVar(&opts.force, "force", false, "include records that are not reprocess_eligible")
	fs.BoolVar(&opts.dryRun, "dry-run", false, "list what would run; change nothing")
	fs.BoolVar(&opts.json, "json", false, "print the result as one JSON object on stdout")
	cmdutil.MaxCostFlag(fs, &opts.maxCost)
	cmdutil.ClaudeFlags(fs, &opts.claude)
	cmdutil.RedriveFlags(fs, &opts.workflow, &opts.onto)
	fs.StringVar(&opts.signature, "signature", "", "redrive only the records with this error_signature (one failure cluster)")
	fs.IntVar(&opts.sample, "sample", 0, "with --signature: run this many records of the cluster first and stop if all fail again the same way")
	cmdutil.AgentUserFlag(fs, &opts.agentUser)
	fs.IntVar(&opts.batchSize, "batch-size", runner.DefaultRedriveBatch, "records paged into the job at a time (the next page is read when one is done)")
	return cmd
}

func runDLQRetry(ctx context.Context, f *cmdutil.Factory, opts *dlqRetryOptions) error {
	if opts.sample < 0 {
		return cmdutil.UsageErrorf("--sample must be positive")
	}
	if opts.sample > 0 && opts.signature == "" {
		return cmdutil.UsageErrorf("--sample needs --signature")
	}
	if opts.maxRetries < 0 || opts.parallel < 0 {
		return cmdutil.UsageErrorf("--max-retries and --parallel must be positive")
	}
	if opts.batchSize < 0 {
		return cmdutil.UsageErrorf("--batch-size must be positive")
	}
	if err := cmdutil.CheckMaxCost(opts.maxCost); err != nil {
		return err
	}
	if err := cmdutil.CheckClaude(opts.claude); err != nil {
		return err
	}
	eng, err := f.JobEngine()
	if err != nil {
		return err
	}
	id, err := f.ResolveJobID(opts.jobID, "")
	if err != nil {
		return err
	}
	spec := runner.RedriveSpec{
		JobID: id, Filter: opts.filter, MaxRetries: opts.maxRetries, Force: opts.force, DryRun: opts.dryRun,
		Signature: opts.signature, Sample: opts.sample, BatchSize: opts.batchSize,
		WorkflowFile: opts.workflow, Onto: opts.onto, MaxCostUSD: opts.maxCost, Agents: f.Agents(opts.parallel, opts.agentUser, opts.claude),
	}
	if opts.dryRun && opts.signature == "" {
		return dryRun(ctx, f, eng, spec, opts.json)
	}
	res, err := eng.Redrive(ctx, spec)
	if opts.dryRun && err == nil && !opts.json && res.Canary != nil {
		cmdutil.Teardown(res)
		c := res.Canary
		fmt.Fprintf(f.ErrOut, "dry run: signature %q: %d sample item(s) first, then %d more unless all the sample fail again the same way\n",
			c.Signature, len(c.Sample), len(c.Rest))
		for _, id := range c.Sample {
			fmt.Fprintf(f.Out, "sample\t%s\n", id)
		}
		for _, id := range c.Rest {
			fmt.Fprintf(f.Out, "rest\t%s\n", id)
		}
		return nil
	}
	return f.FinishJob(res, err, opts.json)
}

// dryRun streams the selection (issue 11): each selected item is written
// as it is selected (a line "ID\tLABEL", or with asJSON one element of
// the result's "items", spooled to a temporary file until the counts that
// precede it are known), so memory does not grow with the DLQ.
func dryRun(ctx context.Context, f *cmdutil.Factory, eng *runner.Engine, spec runner.RedriveSpec, asJSON bool) error {
	var w *bufio.Writer
	var spool *os.File
	if asJSON {
		var err error
		spool, err = os.CreateTemp("", "prodigy-dry-run-*.json")
		if err != nil {
			return fmt.Errorf("dry run: %w", err)
		}
		defer os.Remove(spool.Name())
		defer spool.Close()
		w = bufio.NewWriter(spool)
	} else {
		w = bufio.NewWriter(f.Out)
	}
	n := 0
	spec.Selected = func(it runner.ItemOutcome) error {
		n++
		if !asJSON {
			_, err := fmt.Fprintf(w, "%s\t%s\n", it.ItemID, it.Label)
			return err
		}
		b, err := json.MarshalIndent(it, "    ", "  ")
		if err != nil {
			return err
		}
		if n > 1 {
			w.WriteString(",\n")
		}
		w.WriteString("    ")
		_, err = w.Write(b)
		return err
	}
	res, err := eng.Redrive(ctx, spec)
	if ferr := w.Flush(); ferr != nil && err == nil {
		err = fmt.Errorf("dry run: %w", ferr)
	}
	if err != nil {
		return f.FinishJob(res, err, asJSON)
	}
	if !asJSON {
		fmt.Fprintf(f.ErrOut, "dry run: %d item(s) would be retried\n", n)
		return nil
	}
	return writeStreamedJSON(f.Out, res, spool, n)
}

// writeStreamedJSON writes res as cmdutil.WriteJSON would, its "items"
// being the n indented elements spooled (flushed) in spool.
func writeStreamedJSON(out io.Writer, res *runner.Result, spool *os.File, n int) error {
	res.Items = []runner.ItemOutcome{}
	if res.OrphanedWorktrees == nil {
		res.OrphanedWorktrees = []runner.OrphanedWorktree{}
	}
	var head bytes.Buffer
	if err := cmdutil.WriteJSON(&head, res); err != nil {
		return err
	}
	const tail = "[]\n}\n"
	b := head.Bytes()
	if n == 0 {
		_, err := out.Write(b)
		return err
	}
	if !bytes.HasSuffix(b, []byte(tail)) {
		return fmt.Errorf("write JSON: unexpected result encoding")
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	bw := bufio.NewWriter(out)
	bw.Write(b[:len(b)-len(tail)])
	bw.WriteString("[\n")
	if _, err := io.Copy(bw, spool); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	bw.WriteString("\n  ]\n}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}
