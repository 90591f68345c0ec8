package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

const root = "../.."

// releaseConfig is the part of .goreleaser.yaml the release pins.
type releaseConfig struct {
	Dockers         []any `yaml:"dockers"`
	DockerManifests []any `yaml:"docker_manifests"`
	DockersV2       []struct {
		ID        string   `yaml:"id"`
		Images    []string `yaml:"images"`
		Tags      []string `yaml:"tags"`
		Platforms []string `yaml:"platforms"`
	} `yaml:"dockers_v2"`
}

// render expands the only templates the image names and tags may use.
func render(t *testing.T, s, owner, tag string) string {
	t.Helper()
	major, _, _ := strings.Cut(strings.TrimPrefix(tag, "v"), ".")
	out := strings.NewReplacer("{{ .Env.IMAGE_OWNER }}", owner, "{{ .Tag }}", tag, "{{ .Major }}", major).Replace(s)
	if strings.Contains(out, "{{") {
		t.Fatalf("image template %q uses more than .Env.IMAGE_OWNER, .Tag and .Major: extend this test", s)
	}
	return out
}

// TestReleaseTagActionRunsTheImageTheReleaseBuilt follows a release of
// v1.4.2 by octo-org: the images .goreleaser.yaml publishes (as
// GoReleaser's dockers_v2 records them in dist/artifacts.json: one entry
// per name, all with the digest of the one multi-arch image) are pinned
// into a copy of the repository's action.yml, which must then run exactly
// that image by digest and be otherwise unchanged.
func TestReleaseTagActionRunsTheImageTheReleaseBuilt(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg releaseConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Dockers) > 0 || len(cfg.DockerManifests) > 0 {
		t.Error(".goreleaser.yaml uses the deprecated dockers/docker_manifests")
	}
	if len(cfg.DockersV2) != 1 {
		t.Fatalf("want one dockers_v2 image, got %d", len(cfg.DockersV2))
	}
	img := cfg.DockersV2[0]
	if strings.Join(img.Platforms, " ") != "linux/amd64 linux/arm64" {
		t.Errorf("platforms = %v", img.Platforms)
	}
	const owner, tag = "octo-org", "v1.4.2"
	digest := "sha256:" + strings.Repeat("ab12", 16)
	type art struct {
		Name  string         `json:"name"`
		Path  string         `json:"path"`
		Type  string         `json:"type"`
		Extra map[string]any `json:"extra"`
	}
	arts := []art{
		{Name: "prodigy-action", Path: "dist/prodigy-action_linux_amd64_v1/prodigy-action", Type: "Binary", Extra: map[string]any{"ID": "prodigy-action"}},
		{Name: "prodigy-action_1.4.2_linux_amd64.tar.gz", Type: "Archive"},
	}
	var names []string
	for _, i := range img.Images {
		for _, tg := range img.Tags {
			n := render(t, i, owner, tag) + ":" + render(t, tg, owner, tag)
			names = append(names, n)
			arts = append(arts, art{Name: n, Path: n, Type: "Docker Image", Extra: map[string]any{"ID": img.ID, "Digest": digest, "Platforms": img.Platforms}})
		}
	}
	if !containsAll(names, "ghcr.io/octo-org/prodigy-action:v1.4.2", "ghcr.io/octo-org/prodigy-action:v1") {
		t.Fatalf("the release publishes %v: want the immutable :%s and the moving :v1", names, tag)
	}
	dir := t.TempDir()
	artsPath := filepath.Join(dir, "artifacts.json")
	b, _ := json.Marshal(arts)
	if err := os.WriteFile(artsPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(root, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	action := filepath.Join(dir, "action.yml")
	if err := os.WriteFile(action, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := pin(artsPath, tag, action)
	if err != nil {
		t.Fatal(err)
	}
	want := "docker://ghcr.io/octo-org/prodigy-action@" + digest
	if ref != want {
		t.Fatalf("pinned %s, want %s", ref, want)
	}
	pinned, _ := os.ReadFile(action)
	var before, after map[string]any
	if err := yaml.Unmarshal(orig, &before); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(pinned, &after); err != nil {
		t.Fatalf("pinned action.yml does not parse: %v\n%s", err, pinned)
	}
	if got := after["runs"].(map[string]any)["image"]; got != want {
		t.Errorf("runs.image = %v, want %s", got, want)
	}
	before["runs"].(map[string]any)["image"] = want
	bj, _ := json.Marshal(before)
	aj, _ := json.Marshal(after)
	if string(bj) != string(aj) {
		t.Errorf("pinning changed more than runs.image:\n%s\n%s", bj, aj)
	}
	if !strings.Contains(string(pinned), "# A prebuilt multi-arch image") {
		t.Error("pinning dropped action.yml's comments")
	}
	// Another tag's image is not this release's.
	if _, err := pin(artsPath, "v1.4.3", action); err == nil {
		t.Error("pinned a tag the release did not build")
	}
}

// Two digests for one tag (say a retried push) are refused rather than
// guessed between.
func TestReleasePinRefusesDisagreeingDigests(t *testing.T) {
	a := `[{"name":"ghcr.io/o/prodigy-action:v2.0.0","type":"Docker Image","extra":{"Digest":"sha256:` + strings.Repeat("1", 64) + `"}},
	       {"name":"ghcr.io/o/prodigy-action:v2.0.0","type":"Docker Image","extra":{"Digest":"sha256:` + strings.Repeat("2", 64) + `"}}]`
	if _, _, err := Image([]byte(a), "v2.0.0"); err == nil || !strings.Contains(err.Error(), "two images") {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := Image([]byte(`[{"name":"ghcr.io/o/p:v2.0.0","type":"Docker Image","extra":{"Digest":"latest"}}]`), "v2.0.0"); err == nil {
		t.Fatal("accepted a digest that is not sha256")
	}
}

// The release workflow pins, then moves the version tag and the major tag
// to the release commit.
func TestReleaseWorkflowPinsAndMovesTheMajorTag(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Run  string `yaml:"run"`
				Uses string `yaml:"uses"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, s := range wf.Jobs["release"].Steps {
		switch {
		case strings.HasPrefix(s.Uses, "goreleaser/goreleaser-action"):
			order = append(order, "goreleaser")
		case strings.Contains(s.Run, "go run ./internal/releasepin"):
			order = append(order, "pin")
		case strings.Contains(s.Run, `git tag -f -a "$major"`) && strings.Contains(s.Run, `git push --force origin "refs/tags/$TAG" "refs/tags/$major"`):
			order = append(order, "move tags")
		}
	}
	if strings.Join(order, ",") != "goreleaser,pin,move tags" {
		t.Errorf("release steps = %v, want goreleaser, pin, move tags", order)
	}
}

// goreleaser check on the repository's configuration, with the binary
// .ci/release-check builds (PRODIGY_GORELEASER); it fails on deprecated keys.
func TestGoReleaserCheck(t *testing.T) {
	bin := os.Getenv("PRODIGY_GORELEASER")
	if bin == "" {
		t.Skip("PRODIGY_GORELEASER not set: .ci/release-check runs this with GoReleaser from the module proxy")
	}
	cmd := exec.Command(bin, "check")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(strings.ToLower(string(out)), "deprecat") {
		t.Fatalf("goreleaser check: %v\n%s", err, out)
	}
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}
