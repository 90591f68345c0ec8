package actionapp

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

func TestActionTracesWithTheWorkflowEnv(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		traces = map[string]bool{}
		keys   []string
	)
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					if s.GetName() == "job" {
						traces[hex.EncodeToString(s.GetTraceId())] = true
					}
				}
			}
		}
	}))
	defer otlp.Close()
	const apiKey = "collector-key-5f4e3d2c1b"
	gh := newFakeGitHub(t)
	gh.runID = 555
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	// OTEL_* set in the workflow step's env: reach the Action's environment.
	at := newActionTest(t, gh, repo, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.URL, "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=" + apiKey})
	if code := at.run(t); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, at.out.String(), at.errb.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(traces) != 1 || len(keys) == 0 || keys[0] != apiKey {
		t.Fatalf("traces received %v, api keys %q", traces, keys)
	}
	summary := at.file(t, "GITHUB_STEP_SUMMARY")
	for id := range traces {
		if !strings.Contains(summary, "· trace `"+id+"`") {
			t.Errorf("summary lacks trace %s:\n%s", id, summary)
		}
	}
	if !strings.Contains(at.out.String(), "::add-mask::"+apiKey) {
		t.Errorf("the collector's API key is not masked in the log")
	}
}
