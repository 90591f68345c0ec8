// Command releasepin makes a release tag's action.yml run exactly the image
// that release built. The release workflow (.github/workflows/release.yml)
// runs it after GoReleaser has pushed the multi-arch image:
//
//	go run ./internal/releasepin -artifacts dist/artifacts.json -tag v1.2.3 -action action.yml
//
// It reads GoReleaser's dist/artifacts.json, takes the dockers_v2 image
// (type "Docker Image") published under the tag, checks that every name it
// was pushed as carries the same digest, and rewrites `runs.image` of
// action.yml to `docker://<repository>@<digest>`: a digest cannot be moved
// the way a tag can, so `uses: owner/prodigy-action@v1.2.3` (or the commit)
// always runs that image. It prints the reference it wrote. Comments and
// every other line of action.yml are kept.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

func main() {
	arts := flag.String("artifacts", "dist/artifacts.json", "GoReleaser's artifacts list")
	tag := flag.String("tag", "", "the release tag (e.g. v1.2.3)")
	action := flag.String("action", "action.yml", "the action.yml to rewrite")
	flag.Parse()
	ref, err := pin(*arts, *tag, *action)
	if err != nil {
		fmt.Fprintln(os.Stderr, "releasepin:", err)
		os.Exit(1)
	}
	fmt.Println(ref)
}

// artifact is one entry of GoReleaser's dist/artifacts.json.
type artifact struct {
	Name  string         `json:"name"`
	Type  string         `json:"type"`
	Extra map[string]any `json:"extra"`
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Image finds the image GoReleaser published for tag in artifacts.json
// and returns its repository (without tag) and digest.
func Image(artifactsJSON []byte, tag string) (repo, digest string, err error) {
	var arts []artifact
	if err := json.Unmarshal(artifactsJSON, &arts); err != nil {
		return "", "", fmt.Errorf("read artifacts: %w", err)
	}
	for _, a := range arts {
		if a.Type != "Docker Image" {
			continue
		}
		name, t, ok := strings.Cut(a.Name[strings.LastIndex(a.Name, "/")+1:], ":")
		if !ok || t != tag {
			continue
		}
		r := a.Name[:strings.LastIndex(a.Name, "/")+1] + name
		d, _ := a.Extra["Digest"].(string)
		if !digestRE.MatchString(d) {
			return "", "", fmt.Errorf("image %s has no sha256 digest (%q)", a.Name, d)
		}
		if repo != "" && (r != repo || d != digest) {
			return "", "", fmt.Errorf("two images for tag %s: %s@%s and %s@%s", tag, repo, digest, r, d)
		}
		repo, digest = r, d
	}
	if repo == "" {
		return "", "", fmt.Errorf("no image tagged %s in the artifacts (did the dockers_v2 publish run?)", tag)
	}
	return repo, digest, nil
}

// SetImage rewrites runs.image of the action.yml text to ref, keeping
// everything else.
func SetImage(actionYML []byte, ref string) ([]byte, error) {
	file, err := parser.ParseBytes(actionYML, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse action.yml: %w", err)
	}
	p, err := yaml.PathString("$.runs.image")
	if err != nil {
		return nil, err
	}
	if _, err := p.ReadNode(file); err != nil {
		return nil, fmt.Errorf("action.yml has no runs.image: %w", err)
	}
	val, err := yaml.Marshal(ref)
	if err != nil {
		return nil, err
	}
	if err := p.ReplaceWithReader(file, bytes.NewReader(val)); err != nil {
		return nil, fmt.Errorf("set runs.image: %w", err)
	}
	out := []byte(file.String())
	if !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	return out, nil
}

func pin(artsPath, tag, actionPath string) (string, error) {
	if tag == "" {
		return "", errors.New("-tag is required")
	}
	data, err := os.ReadFile(artsPath)
	if err != nil {
		return "", err
	}
	repo, digest, err := Image(data, tag)
	if err != nil {
		return "", err
	}
	ref := "docker://" + repo + "@" + digest
	f, err := os.Open(actionPath)
	if err != nil {
		return "", err
	}
	src, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return "", err
	}
	out, err := SetImage(src, ref)
	if err != nil {
		return "", err
	}
	return ref, os.WriteFile(actionPath, out, 0o644)
}
