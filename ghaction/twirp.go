package ghaction

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"
)

// twirpService is the path prefix of the v4 artifact service.
const twirpService = "/twirp/github.actions.results.api.v1.ArtifactService/"

// maxErrorBody bounds how much of an error response is kept in an error.
const maxErrorBody = 4 << 10

// TwirpError is a non-2xx answer of the results service. Code and Msg come
// from a Twirp error body when there is one (act's server sends none).
type TwirpError struct {
	Method     string
	StatusCode int
	Code       string
	Msg        string
}

func (e *TwirpError) Error() string {
	s := fmt.Sprintf("artifact service %s: HTTP %d", e.Method, e.StatusCode)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Is makes errors.Is(err, ErrArtifactExists) true for a duplicate name.
func (e *TwirpError) Is(target error) bool {
	return target == ErrArtifactExists && (e.StatusCode == http.StatusConflict || e.Code == "already_exists")
}

// ErrArtifactExists means an artifact of that name already exists on the
// workflow run (HTTP 409 / Twirp already_exists).
var ErrArtifactExists = errors.New("an artifact with this name already exists on the workflow run")

// twirp posts req as JSON to method and decodes the response object into a
// tolerant field map. 429/5xx and transport errors are retried.
func (c *ArtifactClient) twirp(ctx context.Context, method string, req any) (fields, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode %s request: %w", method, err)
	}
	var out fields
	err = c.retry.do(ctx, func() error {
		var cerr error
		out, cerr = c.twirpOnce(ctx, method, body)
		return cerr
	})
	return out, err
}

func (c *ArtifactClient) twirpOnce(ctx context.Context, method string, body []byte) (fields, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.origin+twirpService+method, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build %s request: %w", method, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(hreq)
	if err != nil {
		err = fmt.Errorf("call artifact service %s: %w", method, err)
		if isTransportError(err) {
			return nil, retryable{err}
		}
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, retryable{fmt.Errorf("read artifact service %s response: %w", method, err)}
	}
	if resp.StatusCode/100 != 2 {
		terr := &TwirpError{Method: method, StatusCode: resp.StatusCode}
		var tb struct {
			Code string `json:"code"`
			Msg  string `json:"msg"`
		}
		if json.Unmarshal(data, &tb) == nil {
			terr.Code, terr.Msg = tb.Code, tb.Msg
		} else if len(data) > 0 {
			terr.Msg = strings.TrimSpace(string(data[:min(len(data), maxErrorBody)]))
		}
		if retryableStatus(resp.StatusCode) {
			return nil, retryable{terr}
		}
		return nil, terr
	}
	var f fields
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decode artifact service %s response: %w", method, err)
	}
	return f, nil
}

// fields is a decoded JSON object whose keys may be proto field names
// (snake_case) or lowerCamelCase: the real service and act's server differ.
type fields map[string]json.RawMessage

func (f fields) raw(name string) (json.RawMessage, bool) {
	if v, ok := f[name]; ok {
		return v, true
	}
	v, ok := f[lowerCamel(name)]
	return v, ok
}

// str returns a string field ("" when absent or not a string).
func (f fields) str(name string) string {
	v, ok := f.raw(name)
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// boolean returns a bool field (false when absent).
func (f fields) boolean(name string) bool {
	v, ok := f.raw(name)
	if !ok {
		return false
	}
	var b bool
	_ = json.Unmarshal(v, &b)
	return b
}

// int64 returns an int64 field encoded as a JSON number or string (proto3
// JSON encodes int64 as a string).
func (f fields) int64(name string) (int64, error) {
	v, ok := f.raw(name)
	if !ok {
		return 0, nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		if s == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("field %s: %w", name, err)
		}
		return n, nil
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, fmt.Errorf("field %s: %w", name, err)
	}
	return n.Int64()
}

func lowerCamel(snake string) string {
	var b strings.Builder
	up := false
	for _, r := range snake {
		if r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
