package shard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// Size limits of the files gather reads from a shard output: an output is
// untrusted input (an artifact anyone with write access to the run could
// have replaced), so no file is read or fetched past its limit.
const (
	// MaxResultBytes bounds result.json: a base plus a share per item
	// of the shard (outcomes carry bounded error messages).
	MaxResultBytes = 16 << 20
	// maxResultBytesPerItem is the share of one item in result.json.
	maxResultBytesPerItem = 64 << 10
	// MaxRecordBytes bounds one DLQ record file of an output.
	MaxRecordBytes = 16 << 20
	// MaxBundleBytes bounds shard.bundle.
	MaxBundleBytes = 8 << 30
)

// shardResultLimit is the size limit of the result.json of a shard of n
// items.
func shardResultLimit(n int) int64 {
	return int64(MaxResultBytes) + int64(n)*maxResultBytesPerItem
}

// errOutputTooLarge is wrapped by readLimited's size refusals.
var errOutputTooLarge = errors.New("file too large")

// readLimited reads the regular file path when it holds at most limit
// bytes; anything else (larger, a directory, a FIFO or device, a symlink to
// one) is refused without reading it.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %w (%d bytes, the limit is %d)", path, errOutputTooLarge, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w (it grew past the limit of %d bytes)", path, errOutputTooLarge, limit)
	}
	return data, nil
}

// checkLimited refuses path unless it is a regular file of at most limit
// bytes (for files another program reads, such as a bundle git fetches).
func checkLimited(path string, limit int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > limit {
		return fmt.Errorf("%s: %w (%d bytes, the limit is %d)", path, errOutputTooLarge, st.Size(), limit)
	}
	return nil
}

// newPlanID is a plan's id: a digest of what the plan holds and a nonce
// (the clock and the job's random source), so two plans of the same job id
// and items still differ.
func newPlanID(p *Plan, nonce string) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(nonce))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// errForeignOutput is wrapped by the refusals of outputs that are not this
// plan's: another plan, another job, or content the plan cannot have made.
var errForeignOutput = errors.New("shard output refused")

// checkOutputItems refuses a result.json whose items are not exactly
// shard sh's items, each once.
func checkOutputItems(dir string, sh PlanShard, sr *Result) error {
	want := make(map[string]bool, len(sh.Items))
	for _, id := range sh.Items {
		want[id] = true
	}
	seen := make(map[string]bool, len(sr.Items))
	for _, it := range sr.Items {
		if !want[it.ItemID] {
			return fmt.Errorf("%w: %s lists item %q, which is not an item of shard %d", errForeignOutput, dir, it.ItemID, sh.Shard)
		}
		if seen[it.ItemID] {
			return fmt.Errorf("%w: %s lists item %q twice", errForeignOutput, dir, it.ItemID)
		}
		seen[it.ItemID] = true
	}
	if len(seen) != len(want) {
		return fmt.Errorf("%w: %s lists %d of shard %d's %d items", errForeignOutput, dir, len(seen), sh.Shard, len(want))
	}
	return nil
}

// verifyShardBranch checks that the shard branch fetched into ref is what
// a shard of this plan makes: every merge on its first-parent chain since
// the base is an item merge of job jobID naming one item of the shard that
// result.json says merged, each once. Other merges (items of another shard
// or job, merges pushed onto the branch) refuse the output. Plain commits
// are allowed: a custom failure handler commits in the shard's parent
// worktree.
func verifyShardBranch(ctx context.Context, git *gitops.Client, dir, ref, base, jobID string, sh PlanShard, sr *Result) error {
	merged := map[string]bool{}
	for _, it := range sr.Items {
		if it.State == jobstore.ItemMerged {
			merged[it.ItemID] = true
		}
	}
	log, err := git.FirstParentLog(ctx, ref, base, 0)
	if err != nil {
		return fmt.Errorf("%w: %w", errUnreadableShard, err)
	}
	seen := map[string]bool{}
	for _, c := range log {
		if len(c.Parents) < 2 {
			continue
		}
		tr := c.Trailers()
		jobs, items := gitops.TrailerValues(tr, "Prodigy-Job"), gitops.TrailerValues(tr, "Prodigy-Item")
		if len(jobs) != 1 || jobs[0] != jobID || len(items) != 1 {
			return fmt.Errorf("%w: %s: merge %s on the shard branch is not an item merge of job %s", errForeignOutput, dir, short(c.ID), jobID)
		}
		id, err := strconv.Unquote(strings.TrimSpace(items[0]))
		if err != nil || !merged[id] || seen[id] {
			return fmt.Errorf("%w: %s: merge %s brings item %s, which result.json does not list once as merged in shard %d", errForeignOutput, dir, short(c.ID), strings.TrimSpace(items[0]), sh.Shard)
		}
		seen[id] = true
	}
	return nil
}

// shardRef is where gather fetches shard k's branch.
func shardRef(jobID string, k int) string {
	return "refs/prodigy-shards/" + jobID + "/shard-" + strconv.Itoa(k)
}

// outputFile is a file of a shard output directory.
func outputFile(dir, name string) string { return filepath.Join(dir, name) }
