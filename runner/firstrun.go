package runner

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/items"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/validate"
)

// Labeler returns the label function of a job's items, the labels the
// engine gives them (items.ItemLabel): it reads the job's workflow (its
// original file, else the copy kept with the job) for map.id_field. When
// neither can be read, labels render the item data. Only the checkpoint's
// job-level fields are read (jobstore.LoadSummary), whatever the job's size.
func Labeler(p Paths) func(itemID string, data json.RawMessage) string {
	idField := ""
	if cp, err := jobstore.LoadSummary(p); err == nil {
		if wf, err := loadJobWorkflow(cp, p); err == nil {
			idField = wf.Map.IDField
		}
	}
	return func(itemID string, data json.RawMessage) string { return items.ItemLabel(itemID, data, idField) }
}

// itemName is how log lines name an item: its id, followed by its label
// when the label says more than the id (read with map.id_field idField).
func itemName(it *jobstore.CheckpointItem, idField string) string {
	label := it.Label
	if label == "" {
		label = items.ItemLabel(it.ItemID, it.Data, idField)
	}
	if label == "" || label == it.ItemID {
		return it.ItemID
	}
	return it.ItemID + " " + label
}

// announce prints the job's first line: id, results branch and the number
// of items (n < 0: not known before setup has run), then warns about what
// the agents will not see.
func (j *job) announce(ctx context.Context, n int) {
	count := fmt.Sprintf("%d items", n)
	if n < 0 {
		count = "items listed after setup"
	}
	j.logf("job %s · results branch %s · %s", j.id, j.branch, count)
	j.warnCheckout(ctx)
}

// warnCheckout warns about the user's uncommitted changes, which agents
// (starting from HEAD) do not see (validate.Checkout).
func (j *job) warnCheckout(ctx context.Context) {
	top := j.git.TopLevel()
	status, err := j.git.StatusSummary(ctx, top)
	if err != nil {
		return
	}
	for _, w := range validate.Checkout(j.wf, top, status) {
		j.warn(w)
	}
}

// warnNoItems reports a selection of zero items: a loud warning, or with
// RunSpec.RequireItems an input error.
func (j *job) warnNoItems() error {
	why := validate.NoItems(j.wf.Map)
	if j.requireItems {
		return usage(fmt.Errorf("%s and --require-items is set", why))
	}
	j.warn("!!! " + why + ": nothing will run (pass --require-items to make this an error)")
	return nil
}

// logFailedItems lists (at most 10 of) the job's dead-lettered items with
// their labels after the summary line.
func (j *job) logFailedItems(res *Result) {
	const most = 10
	if res.Failed == 0 {
		return // nothing to read (a large job's outcomes are on disk)
	}
	n := 0
	err := res.EachItem(func(it ItemOutcome) error {
		if it.State != ItemDLQ {
			return nil
		}
		if n++; n > most {
			return nil
		}
		name := it.ItemID
		if it.Label != "" && it.Label != it.ItemID {
			name += " " + it.Label
		}
		j.logf("  in the DLQ: %s [%s] %s", name, it.ErrorType, brief.OneLine(it.Error, 120))
		return nil
	})
	if err != nil {
		j.warn(fmt.Sprintf("could not list the items in the DLQ: %v", err))
	}
	if n > most {
		j.logf("  … and %d more (prodigy-action dlq list --job-id %s)", n-most, j.id)
	}
}
