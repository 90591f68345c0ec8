package ghaction

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// BackendIDs are the results-service identifiers of the current workflow run
// and job, taken from the runtime token.
type BackendIDs struct {
	WorkflowRun string
	WorkflowJob string
}

// ErrNoBackendIDs means the runtime token carries no
// "Actions.Results:<run>:<job>" scope.
var ErrNoBackendIDs = errors.New("runtime token has no Actions.Results scope")

// BackendIDsFromToken decodes (without verifying) the JWT in
// ACTIONS_RUNTIME_TOKEN and returns the ids from its `scp` claim, as the
// toolkit's getBackendIdsFromToken does.
func BackendIDsFromToken(token string) (BackendIDs, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return BackendIDs{}, fmt.Errorf("parse runtime token: not a JWT (%d parts)", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return BackendIDs{}, fmt.Errorf("parse runtime token payload: %w", err)
	}
	var claims struct {
		Scp string `json:"scp"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return BackendIDs{}, fmt.Errorf("parse runtime token claims: %w", err)
	}
	for _, scope := range strings.Fields(claims.Scp) {
		p := strings.Split(scope, ":")
		if len(p) == 3 && p[0] == "Actions.Results" && p[1] != "" && p[2] != "" {
			return BackendIDs{WorkflowRun: p[1], WorkflowJob: p[2]}, nil
		}
	}
	return BackendIDs{}, ErrNoBackendIDs
}
