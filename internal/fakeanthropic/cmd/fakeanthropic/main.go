// Command fakeanthropic serves a scripted Messages API (package
// fakeanthropic) for tests that run the real Claude Code binary outside Go,
// such as the container end-to-end test (.ci/action-e2e).
//
//	fakeanthropic -script turns.json -addr-file ADDR [-addr 127.0.0.1:0]
//
// turns.json is a JSON array of turns: {"text": "…"}, {"tool": {"name":
// "Bash", "input": {…}}}, {"status": 529, "header": {"retry-after": "1"}}.
// GET /_requests returns what the server saw, as JSON. It runs until
// killed.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"os"

	"github.com/prodigy-action/prodigy-action/internal/fakeanthropic"
)

type turn struct {
	Text string `json:"text"`
	Tool *struct {
		Name  string `json:"name"`
		Input any    `json:"input"`
	} `json:"tool"`
	Status int                 `json:"status"`
	Header map[string]string   `json:"header"`
	Body   string              `json:"body"`
	Repeat int                 `json:"repeat"`
	Usage  fakeanthropic.Usage `json:"usage"`
}

func main() {
	scriptFile := flag.String("script", "", "JSON array of turns")
	addrFile := flag.String("addr-file", "", "write the base URL here")
	flag.Parse()
	var turns []turn
	if *scriptFile != "" {
		b, err := os.ReadFile(*scriptFile)
		if err != nil {
			log.Fatal(err)
		}
		if err := json.Unmarshal(b, &turns); err != nil {
			log.Fatalf("%s: %v", *scriptFile, err)
		}
	}
	script := make([]fakeanthropic.Turn, 0, len(turns))
	for _, t := range turns {
		ft := fakeanthropic.Turn{Text: t.Text, Status: t.Status, Header: t.Header, Body: t.Body, Repeat: t.Repeat, Usage: t.Usage}
		if t.Tool != nil {
			ft.Tool = &fakeanthropic.ToolUse{Name: t.Tool.Name, Input: t.Tool.Input}
		}
		script = append(script, ft)
	}
	s, err := fakeanthropic.New(script...)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(s.URL), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("fakeanthropic listening on %s with %d turns", s.URL, len(script))
	select {}
}
