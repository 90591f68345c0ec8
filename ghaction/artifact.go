package ghaction

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ArtifactClientOptions configures NewArtifactClient.
type ArtifactClientOptions struct {
	// ResultsURL is ACTIONS_RESULTS_URL; only its origin is used.
	ResultsURL string
	// RuntimeToken is ACTIONS_RUNTIME_TOKEN (a JWT carrying the backend ids).
	RuntimeToken string
	// HTTPClient sends every request; nil means a client with a 2-minute timeout.
	HTTPClient *http.Client
	// Retry governs retries of 429/5xx and transport errors.
	Retry RetryPolicy
	// Now is the clock for expires_at; nil means time.Now.
	Now func() time.Time
	// Mask registers a secret with the runner's log masking (AddMask); the
	// client passes it the signature of every signed URL. nil ignores them.
	Mask func(string)
	// MaxDownload bounds Download's body; 0 means 512 MiB.
	MaxDownload int64
}

// ArtifactClient is a small client of the v4 artifact protocol
// (github.actions.results.api.v1.ArtifactService, Twirp JSON) that can only
// address the current workflow run. It is safe for concurrent use.
type ArtifactClient struct {
	origin      string
	token       string
	ids         BackendIDs
	hc          *http.Client
	retry       RetryPolicy
	now         func() time.Time
	mask        func(string)
	maxDownload int64
}

// ErrArtifactsUnavailable means the environment lacks ACTIONS_RESULTS_URL or
// ACTIONS_RUNTIME_TOKEN (not inside an action step, or on GHES).
var ErrArtifactsUnavailable = errors.New("artifact service unavailable: ACTIONS_RESULTS_URL or ACTIONS_RUNTIME_TOKEN is not set")

// NewArtifactClient validates o and returns a client. It fails with
// ErrArtifactsUnavailable when the URL or token is empty.
func NewArtifactClient(o ArtifactClientOptions) (*ArtifactClient, error) {
	if o.ResultsURL == "" || o.RuntimeToken == "" {
		return nil, ErrArtifactsUnavailable
	}
	u, err := url.Parse(o.ResultsURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("parse ACTIONS_RESULTS_URL %q: not an absolute URL", o.ResultsURL)
	}
	ids, err := BackendIDsFromToken(o.RuntimeToken)
	if err != nil {
		return nil, err
	}
	c := &ArtifactClient{
		origin: u.Scheme + "://" + u.Host, token: o.RuntimeToken, ids: ids,
		hc: o.HTTPClient, retry: o.Retry, now: o.Now, mask: o.Mask, maxDownload: o.MaxDownload,
	}
	if c.hc == nil {
		c.hc = &http.Client{Timeout: 2 * time.Minute}
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.mask == nil {
		c.mask = func(string) {}
	}
	if c.maxDownload <= 0 {
		c.maxDownload = 512 << 20
	}
	return c, nil
}

// UploadedArtifact describes a finalized artifact.
type UploadedArtifact struct {
	ID     int64
	Name   string
	Size   int64
	Digest string // "sha256:<hex>" of the uploaded bytes
	// ExpiresAt is when the artifact expires (zero when no retention was requested).
	ExpiresAt time.Time
}

// Upload creates artifact name on the current run, uploads data (a zip) to
// the signed blob URL and finalizes it with its size and sha256 digest.
// retentionDays ≤ 0 keeps the repository default. A duplicate name fails
// with an error matching ErrArtifactExists; see UploadUnique.
func (c *ArtifactClient) Upload(ctx context.Context, name string, data []byte, retentionDays int) (UploadedArtifact, error) {
	return c.UploadFrom(ctx, name, Payload(data), retentionDays)
}

// Blob is what an upload sends: Size bytes read through ReaderAt (a file,
// so memory does not grow with the artifact), and their sha256 digest as
// "sha256:<hex>".
type Blob struct {
	io.ReaderAt
	Size   int64
	Digest string
}

// Payload is the Blob of bytes in memory.
func Payload(data []byte) Blob {
	sum := sha256.Sum256(data)
	return Blob{ReaderAt: bytes.NewReader(data), Size: int64(len(data)), Digest: "sha256:" + hex.EncodeToString(sum[:])}
}

// UploadFrom is Upload of a Blob: the blob is read 8 MiB at a time, so
// an artifact of any size costs one block of memory.
func (c *ArtifactClient) UploadFrom(ctx context.Context, name string, blob Blob, retentionDays int) (UploadedArtifact, error) {
	if err := ValidateArtifactName(name); err != nil {
		return UploadedArtifact{}, err
	}
	req := map[string]any{
		"workflow_run_backend_id":     c.ids.WorkflowRun,
		"workflow_job_run_backend_id": c.ids.WorkflowJob,
		"name":                        name,
		// version 4 without mime_type: what upload-artifact@v4 sends, and
		// act's strict decoder rejects unknown fields.
		"version": 4,
	}
	var expires time.Time
	if retentionDays > 0 {
		expires = c.now().UTC().Add(time.Duration(retentionDays) * 24 * time.Hour)
		req["expires_at"] = expires.Format(time.RFC3339)
	}
	resp, err := c.twirp(ctx, "CreateArtifact", req)
	if err != nil {
		return UploadedArtifact{}, fmt.Errorf("create artifact %q: %w", name, err)
	}
	signed := resp.str("signed_upload_url")
	if !resp.boolean("ok") || signed == "" {
		return UploadedArtifact{}, fmt.Errorf("create artifact %q: service answered without a signed upload URL", name)
	}
	c.maskSignedURL(signed)
	if err := c.putBlob(ctx, signed, blob); err != nil {
		return UploadedArtifact{}, fmt.Errorf("upload artifact %q: %w", name, err)
	}
	digest := blob.Digest
	fin, err := c.twirp(ctx, "FinalizeArtifact", map[string]any{
		"workflow_run_backend_id":     c.ids.WorkflowRun,
		"workflow_job_run_backend_id": c.ids.WorkflowJob,
		"name":                        name,
		"size":                        strconv.FormatInt(blob.Size, 10),
		"hash":                        digest,
	})
	if err != nil {
		return UploadedArtifact{}, fmt.Errorf("finalize artifact %q: %w", name, err)
	}
	id, err := fin.int64("artifact_id")
	if err != nil || !fin.boolean("ok") {
		return UploadedArtifact{}, fmt.Errorf("finalize artifact %q: unexpected response (ok=%v): %w", name, fin.boolean("ok"), err)
	}
	return UploadedArtifact{ID: id, Name: name, Size: blob.Size, Digest: digest, ExpiresAt: expires}, nil
}

// UploadUnique uploads like Upload; when the name is taken on this run (two
// steps or matrix jobs of one run attempt using the same prefix) it retries
// with "-2", "-3", … up to maxTries names in total, and returns the name
// that was used. maxTries < 1 means 10.
func (c *ArtifactClient) UploadUnique(ctx context.Context, name string, data []byte, retentionDays, maxTries int) (UploadedArtifact, error) {
	return c.UploadUniqueFrom(ctx, name, Payload(data), retentionDays, maxTries)
}

// UploadUniqueFrom is UploadUnique of a Blob.
func (c *ArtifactClient) UploadUniqueFrom(ctx context.Context, name string, blob Blob, retentionDays, maxTries int) (UploadedArtifact, error) {
	if maxTries < 1 {
		maxTries = 10
	}
	candidate := name
	for i := 1; ; i++ {
		up, err := c.UploadFrom(ctx, candidate, blob, retentionDays)
		if err == nil || !errors.Is(err, ErrArtifactExists) || i >= maxTries {
			return up, err
		}
		candidate = fmt.Sprintf("%s-%d", name, i+1)
	}
}

// ArtifactInfo is one entry of List.
type ArtifactInfo struct {
	ID        int64
	Name      string
	Size      int64
	CreatedAt time.Time
	Digest    string
}

// List returns the current run's artifacts, optionally only those named
// nameFilter ("" lists all).
func (c *ArtifactClient) List(ctx context.Context, nameFilter string) ([]ArtifactInfo, error) {
	req := map[string]any{
		"workflow_run_backend_id":     c.ids.WorkflowRun,
		"workflow_job_run_backend_id": c.ids.WorkflowJob,
	}
	if nameFilter != "" {
		req["name_filter"] = nameFilter
	}
	resp, err := c.twirp(ctx, "ListArtifacts", req)
	if err != nil {
		return nil, fmt.Errorf("list artifacts: %w", err)
	}
	raw, _ := resp.raw("artifacts")
	var entries []fields
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &entries); err != nil {
			return nil, fmt.Errorf("list artifacts: decode: %w", err)
		}
	}
	out := make([]ArtifactInfo, 0, len(entries))
	for _, e := range entries {
		id, err := e.int64("database_id")
		if err != nil {
			return nil, fmt.Errorf("list artifacts: %w", err)
		}
		size, err := e.int64("size")
		if err != nil {
			return nil, fmt.Errorf("list artifacts: %w", err)
		}
		created, _ := time.Parse(time.RFC3339Nano, e.str("created_at"))
		out = append(out, ArtifactInfo{ID: id, Name: e.str("name"), Size: size, CreatedAt: created, Digest: e.str("digest")})
	}
	return out, nil
}

// Delete deletes artifact name of the current run (what upload-artifact's
// `overwrite` does before it uploads again) and returns its id. A name that
// does not exist is a *TwirpError (not_found) on GitHub's
// service (act's answers ok).
func (c *ArtifactClient) Delete(ctx context.Context, name string) (int64, error) {
	resp, err := c.twirp(ctx, "DeleteArtifact", map[string]any{
		"workflow_run_backend_id":     c.ids.WorkflowRun,
		"workflow_job_run_backend_id": c.ids.WorkflowJob,
		"name":                        name,
	})
	if err != nil {
		return 0, fmt.Errorf("delete artifact %q: %w", name, err)
	}
	if !resp.boolean("ok") {
		return 0, fmt.Errorf("delete artifact %q: the service answered ok=false", name)
	}
	id, _ := resp.int64("artifact_id")
	return id, nil
}

// Download fetches the bytes of artifact name of the current run through a
// signed URL (no auth header is sent to the blob host).
func (c *ArtifactClient) Download(ctx context.Context, name string) ([]byte, error) {
	resp, err := c.twirp(ctx, "GetSignedArtifactURL", map[string]any{
		"workflow_run_backend_id":     c.ids.WorkflowRun,
		"workflow_job_run_backend_id": c.ids.WorkflowJob,
		"name":                        name,
	})
	if err != nil {
		return nil, fmt.Errorf("get signed URL of artifact %q: %w", name, err)
	}
	signed := resp.str("signed_url")
	if signed == "" {
		return nil, fmt.Errorf("get signed URL of artifact %q: empty URL", name)
	}
	c.maskSignedURL(signed)
	var data []byte
	err = c.retry.do(ctx, func() error {
		var gerr error
		data, gerr = getLimited(ctx, c.hc, signed, c.maxDownload)
		return gerr
	})
	if err != nil {
		return nil, fmt.Errorf("download artifact %q: %w", name, err)
	}
	return data, nil
}

// maskSignedURL registers the sig query value of a signed URL for masking.
func (c *ArtifactClient) maskSignedURL(signed string) {
	if u, err := url.Parse(signed); err == nil {
		if sig := u.Query().Get("sig"); sig != "" {
			c.mask(sig)
			if esc := url.QueryEscape(sig); esc != sig {
				c.mask(esc) // the form that appears in a printed URL
			}
		}
	}
}

// ValidateArtifactName rejects names the artifact service refuses
// (toolkit path-and-artifact-name-validation.ts).
func ValidateArtifactName(name string) error {
	if strings.TrimSpace(name) == "" {
		return errors.New("artifact name is empty")
	}
	if i := strings.IndexAny(name, "\":<>|*?\r\n\\/"); i >= 0 {
		return fmt.Errorf("artifact name %q contains the invalid character %q", name, name[i])
	}
	return nil
}

// getLimited GETs u without credentials and returns at most limit bytes;
// a larger body is an error. 429/5xx/transport errors are marked retryable.
func getLimited(ctx context.Context, hc *http.Client, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if isTransportError(err) {
			return nil, retryable{err}
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		err := fmt.Errorf("GET %s: HTTP %d", redactQuery(u), resp.StatusCode)
		if retryableStatus(resp.StatusCode) {
			return nil, retryable{err}
		}
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, retryable{fmt.Errorf("read body: %w", err)}
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("body exceeds the %d-byte limit", limit)
	}
	return data, nil
}

// redactQuery drops the query (signatures) of u for error messages.
func redactQuery(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i] + "?…"
	}
	return u
}
