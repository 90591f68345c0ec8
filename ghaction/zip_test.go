package ghaction

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/redact"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBuildDLQZipRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "items", "b.json"), `{"item_id":"b","failure_count":2,"error_message":"token ghs_SECRET leaked"}`)
	writeFile(t, filepath.Join(dir, "items", "a.json"), `{"item_id":"a","failure_count":1}`)
	writeFile(t, filepath.Join(dir, "items", "notes.txt"), `ignored`)
	writeFile(t, filepath.Join(dir, "index.json"), `{"job_id":"j","item_count":2,"item_ids":["a","b"]}`)
	r := redact.New(redact.Config{Values: []string{"ghs_SECRET"}})

	state := filepath.Join(t.TempDir(), "checkpoint.json")
	writeFile(t, state, `{"job_id":"j","vars":{"T":"ghs_SECRET"}}`)
	data, n, err := BuildDLQZip(dir, r.Bytes, ExtraFile{Name: "job/checkpoint.json", Path: state}, ExtraFile{Name: "job/missing", Path: state + ".nope"})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("count = %d, want 2", n)
	}
	out := t.TempDir()
	if err := ExtractZip(data, out, ExtractLimits{}); err != nil {
		t.Fatal(err)
	}
	var arr []map[string]any
	raw, err := os.ReadFile(filepath.Join(out, DLQArrayFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &arr); err != nil {
		t.Fatal(err)
	}
	if len(arr) != 2 || arr[0]["item_id"] != "a" || arr[1]["item_id"] != "b" {
		t.Errorf("dlq.json = %s", raw)
	}
	if _, err := os.Stat(filepath.Join(out, "job", "missing")); err == nil {
		t.Error("missing extra file was zipped")
	}
	for _, f := range []string{"items/a.json", "items/b.json", "index.json", "dlq.json", "job/checkpoint.json"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
		if bytes.Contains(b, []byte("ghs_SECRET")) {
			t.Errorf("%s contains the secret", f)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "items", "notes.txt")); err == nil {
		t.Error("non-JSON file was zipped")
	}
}

func TestBuildDLQZipEmpty(t *testing.T) {
	t.Parallel()
	_, n, err := BuildDLQZip(filepath.Join(t.TempDir(), "missing"), nil)
	if err != nil || n != 0 {
		t.Fatalf("missing dir: n=%d err=%v, want 0, nil", n, err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "items", "bad.json"), `{not json`)
	if _, _, err := BuildDLQZip(dir, nil); err == nil {
		t.Error("invalid record accepted")
	}
}

type zipEntry struct {
	name string
	mode os.FileMode
	body string
}

func makeZip(t *testing.T, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(e.body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractZipRefusesUnsafeArchives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		zip     []byte
		lim     ExtractLimits
		wantErr bool
	}{
		{"ok", makeZip(t, zipEntry{name: "items/a.json", body: "{}"}, zipEntry{name: "dir/", mode: os.ModeDir | 0o755}), ExtractLimits{}, false},
		{"dotdot", makeZip(t, zipEntry{name: "../evil.txt", body: "x"}), ExtractLimits{}, true},
		{"nested dotdot", makeZip(t, zipEntry{name: "items/../../evil.txt", body: "x"}), ExtractLimits{}, true},
		{"absolute", makeZip(t, zipEntry{name: "/tmp/evil.txt", body: "x"}), ExtractLimits{}, true},
		{"backslash", makeZip(t, zipEntry{name: `..\evil.txt`, body: "x"}), ExtractLimits{}, true},
		{"symlink", makeZip(t, zipEntry{name: "link", mode: os.ModeSymlink | 0o777, body: "/etc/passwd"}), ExtractLimits{}, true},
		{"file too big", makeZip(t, zipEntry{name: "big", body: strings.Repeat("a", 1000)}), ExtractLimits{MaxFileBytes: 999}, true},
		{"total too big", makeZip(t, zipEntry{name: "a", body: "12345"}, zipEntry{name: "b", body: "12345"}), ExtractLimits{MaxTotalBytes: 9}, true},
		{"too many files", makeZip(t, zipEntry{name: "a"}, zipEntry{name: "b"}), ExtractLimits{MaxFiles: 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parent := t.TempDir()
			dest := filepath.Join(parent, "out")
			err := ExtractZip(tt.zip, dest, tt.lim)
			if tt.wantErr != (err != nil) {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, ErrUnsafeZip) {
				t.Errorf("err = %v, want ErrUnsafeZip", err)
			}
			if _, err := os.Stat(filepath.Join(parent, "evil.txt")); err == nil {
				t.Error("a file escaped the destination")
			}
		})
	}
}

func TestPullRequestNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, event, input string
		payload            string
		want               int
		wantErr            bool
	}{
		{"pull_request", "pull_request", "", `{"number":7,"pull_request":{"number":7}}`, 7, false},
		{"pull_request_target", "pull_request_target", "", `{"pull_request":{"number":9}}`, 9, false},
		{"issue_comment on PR", "issue_comment", "", `{"issue":{"number":3,"pull_request":{"url":"x"}}}`, 3, false},
		{"issue_comment on issue", "issue_comment", "", `{"issue":{"number":3}}`, 0, false},
		{"push", "push", "", `{"ref":"refs/heads/main"}`, 0, false},
		{"input wins", "pull_request", "#15", `{"pull_request":{"number":7}}`, 15, false},
		{"dispatch input", "workflow_dispatch", "21", `{"inputs":{}}`, 21, false},
		{"bad input", "workflow_dispatch", "abc", `{}`, 0, true},
		{"negative input", "workflow_dispatch", "-3", `{}`, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ev map[string]any
			if err := json.Unmarshal([]byte(tt.payload), &ev); err != nil {
				t.Fatal(err)
			}
			got, err := PullRequestNumber(tt.event, ev, tt.input)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %d, %v; want %d, err %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestDLQArrayIsWhatMarshalIndentWrites: the streamed dlq.json is byte for
// byte the json.MarshalIndent of the redacted records in name order (the
// format the artifact always had), also for multi-line, indented records
// and an empty DLQ.
func TestDLQArrayIsWhatMarshalIndentWrites(t *testing.T) {
	t.Parallel()
	for name, records := range map[string]map[string]string{
		"empty": {},
		"three": {
			"b.json": "{\n  \"item_id\": \"b\",\n  \"item_data\": {\"x\": [1, 2, {\"y\": \"z\"}]},\n  \"s\": \"a\\nb \\\" c\"\n}\n",
			"a.json": `{"item_id":"a","failure_count":1}`,
			"c.json": "  {\"item_id\": \"c\", \"e\": []}  \n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "items"), 0o755); err != nil {
				t.Fatal(err)
			}
			for n, r := range records {
				writeFile(t, filepath.Join(dir, "items", n), r)
			}
			data, _, err := BuildDLQZip(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for _, f := range zr.File {
				if f.Name == DLQArrayFile {
					rc, _ := f.Open()
					var b bytes.Buffer
					_, _ = b.ReadFrom(rc)
					rc.Close()
					got = b.Bytes()
				}
			}
			want := []json.RawMessage{}
			for _, n := range []string{"a.json", "b.json", "c.json"} {
				if r, ok := records[n]; ok {
					want = append(want, json.RawMessage(r))
				}
			}
			wantBytes, err := json.MarshalIndent(want, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, wantBytes) {
				t.Errorf("dlq.json:\n%s\nwant:\n%s", got, wantBytes)
			}
		})
	}
}

// TestWriteDirZipFile: the tree as upload-artifact lays it out, the digest
// and size of the bytes written, and no symbolic link followed.
func TestWriteDirZipFile(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	for name, body := range map[string]string{"result.json": `{"shard":1}`, "dlq/item-1.json": `{"item_id":"1"}`, "shard.bundle": strings.Repeat("x", 1<<20)} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(secret, []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "dlq", "link.json")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blob, err := WriteDirZipFile(f, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != blob.Size || blob.Digest != "sha256:"+fmt.Sprintf("%x", sha256.Sum256(data)) {
		t.Errorf("blob size %d digest %s do not describe the %d bytes written", blob.Size, blob.Digest, len(data))
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, zf := range zr.File {
		names = append(names, zf.Name)
		rc, _ := zf.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		if zf.Name == "shard.bundle" && len(b) != 1<<20 {
			t.Errorf("shard.bundle: %d bytes", len(b))
		}
	}
	if got := strings.Join(names, " "); got != "dlq/item-1.json result.json shard.bundle" {
		t.Errorf("entries = %s (a symbolic link must not be followed)", got)
	}
}
