package step

import (
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/procsup"
)

// Credential is the procsup credential of an agent's user (nil: the
// engine's).
func Credential(o *gitops.Owner) *procsup.Credential {
	if o == nil {
		return nil
	}
	return &procsup.Credential{UID: o.UID, GID: o.GID}
}
