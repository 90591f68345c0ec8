package ghaction

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// fakeJWT builds an unsigned JWT whose payload carries scp.
func fakeJWT(t *testing.T, scp string) string {
	t.Helper()
	payload, err := json.Marshal(map[string]any{"scp": scp, "exp": 4102444800})
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(payload) + ".c2ln"
}

// sleepRecorder is a Sleeper that records waits and returns at once.
type sleepRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleepRecorder) sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return nil
}
