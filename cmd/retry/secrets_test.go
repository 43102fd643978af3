package main

import (
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// secretShape is an entry of the shared corpus testdata/secrets.json.
type secretShape struct {
	Name   string   `json:"name"`
	Secret string   `json:"secret"`
	URL    string   `json:"url"`
	Header []string `json:"header"`
}

func loadSecrets(t *testing.T) []secretShape {
	t.Helper()
	data, err := os.ReadFile("../../testdata/secrets.json")
	if err != nil {
		t.Fatal(err)
	}
	var corpus struct {
		Secrets []secretShape `json:"secrets"`
	}
	if err := json.Unmarshal(data, &corpus); err != nil {
		t.Fatal(err)
	}
	if len(corpus.Secrets) < 20 {
		t.Fatalf("corpus has %d shapes, want at least 20", len(corpus.Secrets))
	}
	return corpus.Secrets
}

// TestGetRedactsSecrets sends every shape of the corpus that fits a URL or a
// header through `retry get`, to a server that fails and to an address that
// refuses, and checks that no secret reaches the command's output, while the
// server did receive it.
func TestGetRedactsSecrets(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()
	s := &scripted{script: []int{503}}
	ts := httptest.NewServer(s)
	defer ts.Close()
	host := strings.TrimPrefix(ts.URL, "http://")
	checked := 0
	for _, sh := range loadSecrets(t) {
		if sh.URL == "" && len(sh.Header) != 2 {
			continue
		}
		for _, target := range []string{host, refused} {
			t.Run(sh.Name+"/"+target, func(t *testing.T) {
				args := []string{"get", "--attempts", "2", "--initial", "1ms", "--max", "1ms"}
				url := "http://" + target + "/x"
				if sh.URL != "" {
					url = strings.ReplaceAll(sh.URL, "{host}", target)
				}
				if len(sh.Header) == 2 {
					args = append(args, "-H", sh.Header[0]+": "+sh.Header[1])
				}
				stdout, stderr, _ := cli(t, "", append(args, url)...)
				if out := stdout + stderr; strings.Contains(out, sh.Secret) {
					t.Errorf("secret %q in the output:\n%s", sh.Secret, out)
				}
				if !strings.Contains(stderr, "attempt") && !strings.Contains(stderr, "after") {
					t.Errorf("no attempt log on stderr:\n%s", stderr)
				}
			})
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d cases, want at least 20", checked)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hits == 0 {
		t.Fatal("the server received nothing")
	}
}
