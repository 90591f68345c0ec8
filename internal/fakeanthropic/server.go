// Package fakeanthropic is a small, scripted stand-in for Anthropic's
// Messages API (POST /v1/messages), good enough to run the real Claude Code
// binary offline: Claude Code honours ANTHROPIC_BASE_URL, so a test points it
// at this server and scripts what "the model" answers turn by turn.
//
// Responses follow the documented streaming protocol (Server-Sent Events:
// message_start, content_block_start, content_block_delta with text_delta
// or input_json_delta, content_block_stop, message_delta with stop_reason
// and usage, message_stop) or, for a request without "stream": true, one
// JSON message. Each response closes the connection when done, as the
// client waits for the end of the stream otherwise.
//
// The conversation is scripted as a queue of Turns. Only requests that offer
// tools (Claude Code's main loop) take a turn; side requests without tools
// (titles, summaries, command-prefix checks) get SideText and never consume
// the script, so a test does not depend on how many of them a Claude Code
// version makes. When the queue is empty the server answers with the text
// "done" (end_turn).
//
// Each conversation plays the script on its own: a conversation is keyed by
// the working directory Claude Code reports in its system text ("Primary
// working directory: …") and the first user message (the prompt), so
// agents running at once in different worktrees, or items taking turns in
// one pool worktree, each see the whole script; a second run of the same
// prompt in the same directory (a retry) continues where the first one
// stopped. In a tool's input "{{cwd}}" is replaced by that directory and
// "{{conv}}" by 8 hex digits naming the conversation (a file name that
// differs between agents).
package fakeanthropic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Usage is what a response reports in its usage block; Claude Code computes
// total_cost_usd from it with its price table.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Turn is one scripted answer of the model to the main conversation.
// Exactly one of Text, Tool or Status is the point of the turn: Status
// (with Header and Body) answers with an HTTP error instead of a message;
// Tool answers with a tool_use block (after Text, when both are set); Text
// alone ends the turn (stop_reason end_turn).
type Turn struct {
	Text string
	Tool *ToolUse
	// Status, Header and Body make an error response (429, 529, 500, …).
	// Body defaults to the documented error JSON for the status.
	Status int
	Header map[string]string
	Body   string
	// Usage of the response; zero means {input 100, output 20}.
	Usage Usage
	// Repeat answers this turn this many more times before moving on
	// (useful for errors a client retries).
	Repeat int
}

// ToolUse is a tool_use content block: the tool's name and its input.
type ToolUse struct {
	Name  string
	Input any
}

// Request is what the server saw of one request, for assertions.
type Request struct {
	Path   string
	Model  string
	Stream bool
	// Tools is the number of tools the request offered (0: a side request).
	Tools int
	// System is the request's system text (blocks joined).
	System string
	// ToolResults are the tool_result blocks of the last user message.
	ToolResults []ToolResult
	// Answered is what the server did: "turn N", "side", "error 429", ….
	Answered string
}

// ToolResult is a tool_result block Claude Code sent back.
type ToolResult struct {
	ToolUseID string
	IsError   bool
	Content   string
}

// Server is a scripted Messages API. Create it with New, point Claude Code
// at URL, and Close it when done.
type Server struct {
	// URL is http://127.0.0.1:PORT, the value for ANTHROPIC_BASE_URL.
	URL string
	// Model is the model name reported in responses (default
	// "claude-sonnet-4-5").
	Model string
	// SideText answers side requests (default "none").
	SideText string

	ln   net.Listener
	srv  *http.Server
	mu   sync.Mutex
	conv map[string]*progress // by conversation key
	next int                  // id counter (tool_use and message ids)
	reqs []Request
	// script is the main conversation.
	script []Turn
}

// New starts a server on a loopback port with the given script.
func New(script ...Turn) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakeanthropic: listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), Model: "claude-sonnet-4-5", SideText: "none", ln: ln, script: script}
	s.srv = &http.Server{Handler: s}
	go s.srv.Serve(ln) //nolint:errcheck // ends with Close
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Requests returns a copy of what the server saw so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// progress is how far one conversation is in the script.
type progress struct{ turn, reps int }

// Conversations is the number of conversations the server has seen.
func (s *Server) Conversations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conv)
}

// Env is the environment that points Claude Code at this server, offline:
// ANTHROPIC_BASE_URL, a dummy ANTHROPIC_API_KEY and
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1.
func (s *Server) Env() []string {
	return []string{
		"ANTHROPIC_BASE_URL=" + s.URL,
		"ANTHROPIC_API_KEY=sk-ant-fake-key-for-local-tests-only",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
	}
}

type inbound struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	Tools    []any           `json:"tools"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// cwdLine is how Claude Code names its working directory in the system text.
var cwdLine = regexp.MustCompile(`Primary working directory: ([^\n]+)`)

// ServeHTTP answers POST /v1/messages (any query) and GET /_requests (what
// the server saw, as JSON, for tests outside Go); anything else is 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	if r.Method == http.MethodGet && r.URL.Path == "/_requests" {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.Requests()) //nolint:errcheck // the client sees what it sees
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		s.record(Request{Path: r.URL.Path, Answered: "404"})
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in inbound
	if err := json.Unmarshal(body, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := Request{Path: r.URL.Path, Model: in.Model, Stream: in.Stream, Tools: len(in.Tools), System: systemText(in.System)}
	if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == "user" {
		req.ToolResults = toolResults(in.Messages[n-1].Content)
	}
	model := in.Model
	if model == "" {
		model = s.Model
	}
	if len(in.Tools) == 0 {
		req.Answered = "side"
		s.record(req)
		s.answer(w, in.Stream, model, Turn{Text: s.SideText, Usage: Usage{InputTokens: 10, OutputTokens: 2}})
		return
	}
	cwd := workingDir(req.System, in)
	key := cwd
	if len(in.Messages) > 0 {
		key += "\x00" + contentText(in.Messages[0].Content)
	}
	t, n := s.take(key)
	if t.Tool != nil {
		sum := sha256.Sum256([]byte(key))
		t.Tool = &ToolUse{Name: t.Tool.Name, Input: expand(t.Tool.Input, strings.NewReplacer("{{cwd}}", cwd, "{{conv}}", hex.EncodeToString(sum[:4])))}
	}
	if n < 0 {
		req.Answered = "default"
	} else {
		req.Answered = "turn " + strconv.Itoa(n)
	}
	if t.Status != 0 {
		req.Answered += " error " + strconv.Itoa(t.Status)
		s.record(req)
		for k, v := range t.Header {
			w.Header().Set(k, v)
		}
		b := t.Body
		if b == "" {
			b = errorBody(t.Status)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(t.Status)
		io.WriteString(w, b) //nolint:errcheck // the client sees what it sees
		return
	}
	s.record(req)
	s.answer(w, in.Stream, model, t)
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
}

// take returns conversation key's next scripted turn and its index, or
// the default "done" turn and -1.
func (s *Server) take(key string) (Turn, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conv == nil {
		s.conv = map[string]*progress{}
	}
	p := s.conv[key]
	if p == nil {
		p = &progress{}
		s.conv[key] = p
	}
	if p.turn >= len(s.script) {
		return Turn{Text: "done"}, -1
	}
	t, n := s.script[p.turn], p.turn
	if p.reps < t.Repeat {
		p.reps++
	} else {
		p.turn, p.reps = p.turn+1, 0
	}
	return t, n
}

// expand applies r to every string of a tool input.
func expand(in any, r *strings.Replacer) any {
	switch v := in.(type) {
	case string:
		return r.Replace(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = expand(x, r)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = expand(x, r)
		}
		return out
	}
	return in
}

// newID returns prefix and a number unique within the server.
func (s *Server) newID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return fmt.Sprintf("%s%04d", prefix, s.next)
}

// errorBody is the documented error JSON for status.
func errorBody(status int) string {
	kind := "api_error"
	switch status {
	case 400:
		kind = "invalid_request_error"
	case 401:
		kind = "authentication_error"
	case 403:
		kind = "permission_error"
	case 404:
		kind = "not_found_error"
	case 413:
		kind = "request_too_large"
	case 429:
		kind = "rate_limit_error"
	case 529:
		kind = "overloaded_error"
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": http.StatusText(status) + " (fakeanthropic)"}})
	return string(b)
}

// answer writes t as a message, streamed or not.
func (s *Server) answer(w http.ResponseWriter, stream bool, model string, t Turn) {
	u := t.Usage
	if u == (Usage{}) {
		u = Usage{InputTokens: 100, OutputTokens: 20}
	}
	var blocks []map[string]any
	if t.Text != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": t.Text})
	}
	stop := "end_turn"
	if t.Tool != nil {
		input := t.Tool.Input
		if input == nil {
			input = map[string]any{}
		}
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": s.newID("toolu_fake"), "name": t.Tool.Name, "input": input})
		stop = "tool_use"
	}
	id := s.newID("msg_fake")
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{ //nolint:errcheck
			"id": id, "type": "message", "role": "assistant", "model": model, "content": blocks,
			"stop_reason": stop, "stop_sequence": nil, "usage": u,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": u.InputTokens, "output_tokens": 1},
	}})
	for i, b := range blocks {
		switch b["type"] {
		case "text":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		case "tool_use":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			js, _ := json.Marshal(b["input"])
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(js)}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// workingDir is the directory Claude Code says it works in: in the system
// text, or (2.1.x) in a message of role "system".
func workingDir(system string, in inbound) string {
	texts := []string{system}
	for _, m := range in.Messages {
		texts = append(texts, contentText(m.Content))
	}
	for _, t := range texts {
		if m := cwdLine.FindStringSubmatch(t); m != nil {
			return strings.TrimSpace(m[1])
		}
	}
	return ""
}

// systemText joins a system field that is a string or a list of text
// blocks (the same shapes as a message's content).
func systemText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	return contentText(raw)
}

// toolResults reads the tool_result blocks of a user message's content.
func toolResults(raw json.RawMessage) []ToolResult {
	var blocks []struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		IsError   bool            `json:"is_error"`
		Content   json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	var out []ToolResult
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		out = append(out, ToolResult{ToolUseID: b.ToolUseID, IsError: b.IsError, Content: contentText(b.Content)})
	}
	return out
}

func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}
