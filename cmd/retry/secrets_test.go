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

// TestGetUsageRedactsSecrets: a URL or a header that `retry get` refuses is
// named in the one-line usage error without the secret it carries, for
// every shape of the corpus that fits a URL or a header, and for the
// examples of the review that found the leak.
func TestGetUsageRedactsSecrets(t *testing.T) {
	type usageCase struct {
		name, secret string
		args         []string
		want         string // in the line
	}
	const host = "127.0.0.1:1"
	cases := []usageCase{
		{"ftp with userinfo and key", "s3cr3tpw", []string{"ftp://alice:s3cr3tpw@h/p?api_key=KEY123"}, "must be an absolute http or https URL"},
		{"ftp with userinfo and key: the key", "KEY123", []string{"ftp://alice:s3cr3tpw@h/p?api_key=KEY123"}, "must be an absolute http or https URL"},
		{"header without a colon", "SECRETTOKEN", []string{"-H", "Authorization Bearer SECRETTOKEN", "http://" + host + "/"}, "flag --header #1: must be Name: value"},
	}
	for _, sh := range loadSecrets(t) {
		if sh.URL != "" {
			u := strings.ReplaceAll(sh.URL, "{host}", host)
			cases = append(cases,
				usageCase{sh.Name + "/ftp", sh.Secret, []string{strings.Replace(u, "http://", "ftp://", 1)}, "must be an absolute http or https URL"},
				usageCase{sh.Name + "/no scheme", sh.Secret, []string{strings.TrimPrefix(u, "http://")}, "must be an absolute http or https URL"},
				// A control character: url.Parse fails.
				usageCase{sh.Name + "/unparsable", sh.Secret, []string{strings.Replace(u, host, host+"\x7f", 1)}, "must be an absolute http or https URL"},
				usageCase{sh.Name + "/unparsable host", sh.Secret, []string{strings.Replace(u, host, "h%zz", 1)}, "must be an absolute http or https URL"})
		}
		if len(sh.Header) == 2 {
			name, value := sh.Header[0], sh.Header[1]
			cases = append(cases,
				usageCase{sh.Name + "/no colon", sh.Secret, []string{"-H", name + " " + value, "http://" + host + "/"}, "flag --header #1: must be Name: value"},
				usageCase{sh.Name + "/control character", sh.Secret, []string{"-H", name + ": " + value + "\x01", "http://" + host + "/"}, "flag --header " + name + ": the value must be"},
				usageCase{sh.Name + "/bad name", sh.Secret, []string{"-H", "X-Ok: 1", "-H", name + " " + value + ": x", "http://" + host + "/"}, "flag --header #2: the name must be a token"})
		}
	}
	if len(cases) < 40 {
		t.Fatalf("%d cases, want at least 40", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, "", append([]string{"get"}, c.args...)...)
			if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("status %d, stdout %q, stderr %q, want one line with %q", code, stdout, stderr, c.want)
			}
			if strings.Contains(stderr, c.secret) {
				t.Errorf("secret %q in the usage error: %s", c.secret, stderr)
			}
		})
	}
}
