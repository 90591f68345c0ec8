package ghaction

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// blockSize is the Put Block chunk size used by the toolkit (8 MiB).
const blockSize = 8 << 20

// azureVersion is the storage REST version sent with SAS requests.
const azureVersion = "2021-08-06"

// putBlob uploads blob to a SAS URL as a block blob: one Put Block per
// 8 MiB chunk (read into one reused buffer), then Put Block List. (act's
// server ignores a bare Put Blob, so even one small DLQ zip goes through
// Put Block.)
func (c *ArtifactClient) putBlob(ctx context.Context, signed string, blob Blob) error {
	var ids []string
	buf := make([]byte, min(int64(blockSize), max(blob.Size, 1)))
	for i, off := 0, int64(0); off < blob.Size || i == 0; i++ {
		n := min(int64(len(buf)), blob.Size-off)
		if m, err := blob.ReadAt(buf[:n], off); int64(m) < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read block %d: %w", i, err)
		}
		id := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "block-%06d", i))
		u := withQuery(signed, "comp=block&blockid="+urlEscape(id))
		if err := c.putOnce(ctx, u, buf[:n], nil); err != nil {
			return fmt.Errorf("put block %d: %w", i, err)
		}
		ids = append(ids, id)
		off += n
	}
	var xml strings.Builder
	xml.WriteString(`<?xml version="1.0" encoding="utf-8"?><BlockList>`)
	for _, id := range ids {
		xml.WriteString("<Latest>" + id + "</Latest>")
	}
	xml.WriteString("</BlockList>")
	hdr := http.Header{"Content-Type": {"application/xml"}, "X-Ms-Blob-Content-Type": {"application/zip"}}
	if err := c.putOnce(ctx, withQuery(signed, "comp=blocklist"), []byte(xml.String()), hdr); err != nil {
		return fmt.Errorf("put block list: %w", err)
	}
	return nil
}

// putOnce PUTs body to u (no bearer token: the SAS signs the request),
// retrying transient failures.
func (c *ArtifactClient) putOnce(ctx context.Context, u string, body []byte, hdr http.Header) error {
	return c.retry.do(ctx, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("build request: %w", err)
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		req.Header.Set("X-Ms-Version", azureVersion)
		req.ContentLength = int64(len(body))
		resp, err := c.hc.Do(req)
		if err != nil {
			if isTransportError(err) {
				return retryable{err}
			}
			return err
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			err := fmt.Errorf("PUT %s: HTTP %d", redactQuery(u), resp.StatusCode)
			if retryableStatus(resp.StatusCode) {
				return retryable{err}
			}
			return err
		}
		return nil
	})
}

// withQuery appends raw query parameters to u, keeping its existing query
// (and the SAS signature) byte-for-byte intact.
func withQuery(u, q string) string {
	if strings.Contains(u, "?") {
		return u + "&" + q
	}
	return u + "?" + q
}

// urlEscape query-escapes a base64 block id.
func urlEscape(s string) string {
	r := strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D")
	return r.Replace(s)
}
