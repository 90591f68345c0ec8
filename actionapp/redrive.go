package actionapp

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/validate"
)

// redactedMark is what the redactor writes in place of a secret; a record
// whose item_data contains it was stored with parts of its data masked.
const redactedMark = redact.Mask

// Bounds on a downloaded DLQ zip (it may have been crafted by hand).
const (
	maxZipEntries     = 100_000
	maxRecordBytes    = 16 << 20
	maxZipRecordBytes = 512 << 20
)

// jobOutcome is one job this invocation ran.
type jobOutcome struct {
	res *runner.Result
	err error
	// source names the redriven artifact ("" for command run).
	source string
	// meta carries the comment key, PR and history of the fan-out (from the
	// artifact on a redrive; this run's own otherwise).
	meta artifactMeta
	// held are records imported after the run: their data was redacted and
	// could not be re-read, so they stay in the DLQ without running.
	held []dlq.DeadLetteredItem
}

// redrive redrives the DLQ artifacts of run retry-from-run: every one whose
// name is artifact-name or starts with "<artifact-name>-", or only the one
// named exactly artifact-name when the run has it. Each artifact becomes
// its own job, run with the workflow of the current checkout (the
// `workflow` input); from an artifact only DLQ records are imported, as
// data. The run is checked first: this repository's, not a fork's (unless
// allow-fork-artifacts).
func (r *actionRun) redrive(ctx context.Context, eng Engine, maxCost float64) ([]*jobOutcome, error) {
	e := r.env
	if r.in.Workflow == "" {
		return nil, usageErr("input workflow is required for command retry: a redrive runs the workflow of the current checkout, never one from the artifact")
	}
	wf, err := r.loadWorkflow()
	if err != nil {
		return nil, err
	}
	gh, run, arts, err := r.runArtifacts(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(arts))
	for i, a := range arts {
		names[i] = a.GetName()
	}
	e.gha.Noticef("redriving %d DLQ artifact(s) of run %d with %s: %s", len(arts), run.ID, r.in.Workflow, strings.Join(names, ", "))
	var cur *currentItems
	var outs []*jobOutcome
	for _, a := range arts {
		outs = append(outs, r.redriveArtifact(ctx, gh, wf, a, eng, maxCost, &cur))
	}
	return outs, nil
}

// runArtifacts checks the run of retry-from-run (this repository's, not a
// fork's unless allow-fork-artifacts) before anything is downloaded, and
// selects its DLQ artifacts.
func (r *actionRun) runArtifacts(ctx context.Context) (*github.Client, ghaction.RunInfo, []*github.Artifact, error) {
	gh, err := r.github()
	if err != nil {
		return nil, ghaction.RunInfo{}, nil, err
	}
	run, err := ghaction.GetRun(ctx, gh, r.owner, r.repo, r.in.RetryFromRun)
	if err != nil {
		return nil, ghaction.RunInfo{}, nil, err
	}
	warn, err := ghaction.CheckRunSource(run, r.owner, r.repo, r.allowFork)
	if err != nil {
		return nil, ghaction.RunInfo{}, nil, &runner.UsageError{Err: err}
	}
	if warn != "" {
		r.env.gha.Warningf("%s", warn)
	}
	all, err := ghaction.ListRunArtifacts(ctx, gh, r.owner, r.repo, run.ID)
	if err != nil {
		return nil, ghaction.RunInfo{}, nil, err
	}
	arts, err := selectArtifacts(all, r.in.ArtifactName, run.ID)
	if err != nil {
		return nil, ghaction.RunInfo{}, nil, err
	}
	return gh, run, arts, nil
}

// usageErr is a bad-input error (exit 2).
func usageErr(msg string) error { return &runner.UsageError{Err: errors.New(msg)} }

// loadWorkflow validates the workflow input from the checkout.
func (r *actionRun) loadWorkflow() (*config.Workflow, error) {
	wfPath := r.in.Workflow
	if !filepath.IsAbs(wfPath) {
		wfPath = filepath.Join(r.ws, wfPath)
	}
	v := validate.File(wfPath, validate.Options{})
	if err := v.Err(); err != nil {
		return nil, err
	}
	return v.Workflow, nil
}

// selectArtifacts picks the DLQ artifacts of run: the one named exactly
// name, else every one named "<name>-…" (matrix jobs and attempts upload
// several), oldest first. Expired matches are skipped, and reported with
// their expiry date when nothing else is left.
func selectArtifacts(all []*github.Artifact, name string, runID int64) ([]*github.Artifact, error) {
	var exact, live, expired []*github.Artifact
	for _, a := range all {
		switch {
		case a.GetName() == name:
			exact = append(exact, a)
		case strings.HasPrefix(a.GetName(), name+"-"):
		default:
			continue
		}
		if a.GetExpired() {
			expired = append(expired, a)
		} else {
			live = append(live, a)
		}
	}
	if len(exact) > 0 { // artifact-name names one artifact: only that one
		for _, a := range exact {
			if !a.GetExpired() {
				return []*github.Artifact{a}, nil
			}
		}
		live, expired = nil, exact
	}
	if len(live) == 0 {
		if len(expired) > 0 {
			msgs := make([]string, len(expired))
			for i, a := range expired {
				msgs[i] = ghaction.DescribeExpired(a)
			}
			return nil, fmt.Errorf("run %d has no unexpired DLQ artifact: %s", runID, strings.Join(msgs, "; "))
		}
		return nil, fmt.Errorf("%w: run %d has no artifact named %q or %q", ghaction.ErrNoArtifact, runID, name, name+"-*")
	}
	sort.Slice(live, func(i, j int) bool { return live[i].GetID() < live[j].GetID() })
	return live, nil
}

// redriveArtifact downloads one DLQ artifact, imports its records into a
// fresh job of the current workflow and redrives them.
func (r *actionRun) redriveArtifact(ctx context.Context, gh *github.Client, wf *config.Workflow, a *github.Artifact, eng Engine, maxCost float64, cur **currentItems) *jobOutcome {
	e := r.env
	out := &jobOutcome{source: a.GetName()}
	fail := func(err error) *jobOutcome {
		out.err = fmt.Errorf("artifact %s: %w", a.GetName(), err)
		return out
	}
	runnable, held, meta, err := r.artifactRecords(ctx, gh, wf, a, cur)
	out.meta, out.held = meta, held
	if err != nil {
		return fail(err)
	}

	// A fresh job of the current workflow: setup runs from the checkout,
	// with no items and no reduce; the records then become its DLQ and are
	// redriven (map, then reduce).
	prep, err := r.prepareJob(ctx, wf, eng, maxCost)
	if err != nil {
		return fail(fmt.Errorf("prepare the redrive job: %w", err))
	}
	if err := r.importRecords(prep, runnable); err != nil {
		out.res = prep
		return fail(err)
	}
	res, err := eng.Redrive(ctx, runner.RedriveSpec{
		JobID: prep.JobID, Filter: r.in.RetryFilter, Force: r.in.RetryForce,
		Signature: r.in.RetrySignature, Sample: r.in.RetrySample,
		Onto: r.in.RetryOnto, MaxCostUSD: maxCost, Agents: r.agents(),
	})
	if res == nil {
		res = prep
	}
	out.res, out.err = res, err
	if len(out.held) > 0 {
		if err := r.importRecords(res, out.held); err != nil {
			e.gha.Warningf("%s", r.redact.String(oneLine(err)))
		}
	}
	return out
}

// artifactRecords downloads one DLQ artifact and reads its records as
// data: runnable ones, and held ones whose item_data was redacted and
// cannot be re-read from the current input (they are never run on
// redacted data).
func (r *actionRun) artifactRecords(ctx context.Context, gh *github.Client, wf *config.Workflow, a *github.Artifact, cur **currentItems) (runnable, held []dlq.DeadLetteredItem, meta artifactMeta, err error) {
	e := r.env
	data, err := ghaction.DownloadRunArtifact(ctx, gh, e.BlobClient, r.owner, r.repo, a.GetID(), 0)
	if err != nil {
		return nil, nil, artifactMeta{}, err
	}
	recs, meta, warns, err := readDLQZip(data)
	for _, w := range warns {
		e.gha.Warningf("artifact %s: %s", a.GetName(), r.redact.String(w))
	}
	if err != nil {
		return nil, nil, meta, err
	}
	if len(recs) == 0 {
		return nil, nil, meta, errors.New("it holds no valid DLQ record")
	}
	for _, rec := range recs {
		if !bytes.Contains(rec.ItemData, []byte(redactedMark)) {
			runnable = append(runnable, rec)
			continue
		}
		if *cur == nil {
			*cur = r.loadCurrentItems(ctx, wf)
		}
		fresh, why := (*cur).resolve(rec)
		if why != "" {
			e.gha.Warningf("item %s of artifact %s is not redriven: its item_data was redacted when it was stored and %s; it stays in the DLQ", r.redact.String(rec.ItemID), a.GetName(), why)
			held = append(held, rec)
			continue
		}
		e.gha.Noticef("item %s: its item_data was redacted in the artifact; redriving it with the item re-read from the current input", r.redact.String(rec.ItemID))
		rec.ItemData = fresh
		runnable = append(runnable, rec)
	}
	return runnable, held, meta, nil
}

// importRunDLQ imports the DLQ records of every DLQ artifact of run
// retry-from-run (as data, after the run check) into one fresh job of the
// checkout's workflow and returns its id: `command: plan` with
// retry-from-run re-plans only the failures. Held records (redacted
// item_data) are imported too, but only as DLQ records of that job.
func (r *actionRun) importRunDLQ(ctx context.Context, eng Engine) (string, error) {
	if r.in.Workflow == "" {
		return "", usageErr("input workflow is required: a re-plan runs the workflow of the current checkout, never one from the artifact")
	}
	wf, err := r.loadWorkflow()
	if err != nil {
		return "", err
	}
	gh, _, arts, err := r.runArtifacts(ctx)
	if err != nil {
		return "", err
	}
	var cur *currentItems
	var all []dlq.DeadLetteredItem
	for _, a := range arts {
		runnable, _, _, err := r.artifactRecords(ctx, gh, wf, a, &cur)
		if err != nil {
			return "", fmt.Errorf("artifact %s: %w", a.GetName(), err)
		}
		all = append(all, runnable...)
	}
	prep, err := r.prepareJob(ctx, wf, eng, 0)
	if err != nil {
		return "", fmt.Errorf("prepare the re-plan job: %w", err)
	}
	if err := r.importRecords(prep, all); err != nil {
		return "", err
	}
	return prep.JobID, nil
}

// prepareJob starts a job of wf with no items and no reduce, so setup runs
// (from the checkout's workflow) and the job's state exists; its
// checkpoint points at the workflow file, so the redrive reloads the whole
// workflow, reduce included.
func (r *actionRun) prepareJob(ctx context.Context, wf *config.Workflow, eng Engine, maxCost float64) (*runner.Result, error) {
	if err := os.MkdirAll(r.home, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", r.home, err)
	}
	// The job starts with no items (its map input is not read) and no
	// reduce: the artifact's records are imported into its DLQ next.
	res, err := eng.Run(ctx, runner.RunSpec{Workflow: wf, RepoDir: r.ws, NoItems: true, Agents: r.agents(), MaxCostUSD: maxCost})
	if err != nil {
		return res, err
	}
	if res == nil || res.JobID == "" || res.Repo == "" {
		return res, errors.New("the engine returned no job")
	}
	return res, nil
}

// importRecords adds recs to the DLQ of res's job through the store
// (atomic, locked, validated). The records are not redacted again: they
// were redacted before upload, and an item re-read from the checkout must
// reach the redrive unmasked (the runner redacts the record it writes if
// the item fails again; the uploaded artifact is redacted as always).
func (r *actionRun) importRecords(res *runner.Result, recs []dlq.DeadLetteredItem) error {
	store, err := dlq.Open(r.jobPaths(res).DLQRoot(), res.JobID, dlq.Options{Warn: func(m string) { r.env.gha.Warningf("DLQ: %s", r.redact.String(m)) }})
	if err != nil {
		return fmt.Errorf("open the DLQ of job %s: %w", res.JobID, err)
	}
	var errs []error
	for _, rec := range recs {
		if _, err := store.Add(rec); err != nil {
			errs = append(errs, err)
		}
	}
	if err := store.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("import DLQ records: %w", err)
	}
	return nil
}

// readDLQZip reads the DLQ records (items/*.json) and meta.json of a DLQ
// artifact. A malformed record is skipped with a warning naming its entry;
// every other entry (the job/ state older versions uploaded, dlq.json,
// index.json) is ignored: nothing executable is taken from an artifact.
func readDLQZip(data []byte) (recs []dlq.DeadLetteredItem, meta artifactMeta, warns []string, err error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, meta, nil, fmt.Errorf("not a zip archive: %w", err)
	}
	if len(zr.File) > maxZipEntries {
		return nil, meta, nil, fmt.Errorf("%d entries (limit %d)", len(zr.File), maxZipEntries)
	}
	seen := map[string]string{}
	var total int64
	var ignored []string
	// add keeps one decoded record, or says why not.
	add := func(name string, b []byte) error {
		if total += int64(len(b)); total > maxZipRecordBytes {
			return fmt.Errorf("records exceed %d bytes", maxZipRecordBytes)
		}
		rec, err := decodeRecord(b)
		if err != nil {
			warns = append(warns, fmt.Sprintf("skipped malformed DLQ record %q: %v", name, err))
			return nil
		}
		if prev, dup := seen[rec.ItemID]; dup {
			warns = append(warns, fmt.Sprintf("skipped %q: item %q is already in %q", name, rec.ItemID, prev))
			return nil
		}
		seen[rec.ItemID] = name
		recs = append(recs, rec)
		return nil
	}
	// A DLQ of more than ghaction.ItemEntriesMax records has its records
	// in dlq.json only: read them from there when no items/ entry exists.
	var array *zip.File
	hasItems := false
	for _, f := range zr.File {
		switch {
		case path.Dir(f.Name) == "items" && strings.HasSuffix(f.Name, ".json"):
			hasItems = true
		case f.Name == ghaction.DLQArrayFile && f.Mode().IsRegular():
			array = f
		}
	}
	for _, f := range zr.File {
		name := f.Name
		isRecord := path.Dir(name) == "items" && strings.HasSuffix(name, ".json")
		if !hasItems && array != nil && f == array {
			if err := readArrayRecords(f, add); err != nil {
				return nil, meta, warns, err
			}
			continue
		}
		if name != zipMeta && !isRecord {
			if !strings.HasSuffix(name, "/") && name != ghaction.DLQArrayFile && name != "index.json" {
				ignored = append(ignored, name)
			}
			continue
		}
		if !f.Mode().IsRegular() {
			warns = append(warns, fmt.Sprintf("skipped %q: not a regular file", name))
			continue
		}
		b, err := readEntry(f, maxRecordBytes)
		if err != nil {
			warns = append(warns, fmt.Sprintf("skipped %q: %v", name, err))
			continue
		}
		if name == zipMeta {
			if total += int64(len(b)); total > maxZipRecordBytes {
				return nil, meta, warns, fmt.Errorf("records exceed %d bytes", maxZipRecordBytes)
			}
			var w []string
			meta, w = parseMeta(b)
			warns = append(warns, w...)
			continue
		}
		if err := add(name, b); err != nil {
			return nil, meta, warns, err
		}
	}
	if len(ignored) > 0 {
		sort.Strings(ignored)
		warns = append(warns, fmt.Sprintf("ignored %s: a redrive imports DLQ records only and runs the workflow of the current checkout", strings.Join(ignored, ", ")))
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].ItemID < recs[j].ItemID })
	return recs, meta, warns, nil
}

// readArrayRecords streams dlq.json's elements (a JSON array of records)
// to add, each limited to maxRecordBytes; a malformed array is an error,
// a malformed record a warning (add's).
func readArrayRecords(f *zip.File, add func(name string, b []byte) error) error {
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	defer rc.Close()
	lr := &io.LimitedReader{R: rc, N: maxZipRecordBytes + 1}
	dec := json.NewDecoder(lr)
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return fmt.Errorf("%s is not a JSON array", f.Name)
	}
	for i := 0; dec.More(); i++ {
		before := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("%s: element %d: %w", f.Name, i, err)
		}
		if dec.InputOffset()-before > maxRecordBytes {
			return fmt.Errorf("%s: element %d is larger than %d bytes", f.Name, i, maxRecordBytes)
		}
		if err := add(fmt.Sprintf("%s[%d]", f.Name, i), raw); err != nil {
			return err
		}
	}
	if lr.N <= 0 {
		return fmt.Errorf("records exceed %d bytes", maxZipRecordBytes)
	}
	return nil
}

// readEntry inflates one entry, refusing more than limit bytes (counted on
// the inflated bytes, not the header).
func readEntry(f *zip.File, limit int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// decodeRecord parses and validates one record of the seeds' shape.
func decodeRecord(b []byte) (dlq.DeadLetteredItem, error) {
	rec, err := dlq.Decode(b)
	if err != nil {
		return rec, err
	}
	switch {
	case len(rec.ItemID) > 1024:
		return rec, errors.New("item_id is longer than 1024 bytes")
	case strings.ContainsAny(rec.ItemID, "\x00\n\r"):
		return rec, errors.New("item_id contains control characters")
	case int(rec.FailureCount) < len(rec.FailureHistory) || rec.FailureCount > 1_000_000:
		return rec, fmt.Errorf("failure_count %d does not match its history (%d entries)", rec.FailureCount, len(rec.FailureHistory))
	}
	return rec, nil
}

// currentItems is the work items of the current checkout's input, loaded
// once to re-read items whose data was redacted in an artifact.
type currentItems struct {
	byID map[string]json.RawMessage
	err  error
}

// loadCurrentItems reads the items of wf's map input in the checkout.
func (r *actionRun) loadCurrentItems(ctx context.Context, wf *config.Workflow) *currentItems {
	list, err := runner.LoadItems(ctx, wf, r.ws, scrubEnv(r.env.Environ()))
	if err != nil {
		return &currentItems{err: err}
	}
	c := &currentItems{byID: make(map[string]json.RawMessage, len(list))}
	for _, it := range list {
		c.byID[it.ID] = it.Data
	}
	return c
}

// resolve returns the current data of rec's item, or why there is none:
// the input cannot be read, has no such id, or holds a different item
// there (its data does not match the record outside the masked parts).
func (c *currentItems) resolve(rec dlq.DeadLetteredItem) (json.RawMessage, string) {
	if c.err != nil {
		return nil, fmt.Sprintf("the current input could not be read (%v)", oneLine(c.err))
	}
	data, ok := c.byID[rec.ItemID]
	if !ok {
		return nil, "the current input has no item with that id"
	}
	var masked, fresh any
	if json.Unmarshal(rec.ItemData, &masked) != nil || json.Unmarshal(data, &fresh) != nil || !matchMasked(masked, fresh) {
		return nil, "the current input's item with that id differs from the record"
	}
	return data, ""
}

// matchMasked reports whether fresh could be masked into masked: equal
// structure and values, where a string of masked may hide parts behind
// redactedMark.
func matchMasked(masked, fresh any) bool {
	switch m := masked.(type) {
	case string:
		f, ok := fresh.(string)
		return ok && globMatch(m, f)
	case map[string]any:
		f, ok := fresh.(map[string]any)
		if !ok || len(f) != len(m) {
			return false
		}
		for k, v := range m {
			fv, ok := f[k]
			if !ok || !matchMasked(v, fv) {
				return false
			}
		}
		return true
	case []any:
		f, ok := fresh.([]any)
		if !ok || len(f) != len(m) {
			return false
		}
		for i := range m {
			if !matchMasked(m[i], f[i]) {
				return false
			}
		}
		return true
	default:
		return masked == fresh
	}
}

// globMatch matches s against pattern, where each redactedMark stands for
// one or more characters.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, redactedMark)
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for i, p := range parts[1:] {
		last := i == len(parts)-2
		if last {
			return len(s) > len(p) && strings.HasSuffix(s, p)
		}
		j := strings.Index(s[min(1, len(s)):], p)
		if j < 0 || len(s) == 0 {
			return false
		}
		s = s[1+j+len(p):]
	}
	return true
}
