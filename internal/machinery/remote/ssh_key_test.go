package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestSSHKeyNeverEchoed replays the leak of issue 41: a key given in the
// environment in a form that is not PEM (base64 of it, a one-line
// base64 blob, a broken PEM) fails with an error that holds none of it.
func TestSSHKeyNeverEchoed(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(block))
	b64 := base64.StdEncoding.EncodeToString([]byte(pemKey))
	body := strings.Join(strings.Split(pemKey, "\n")[1:4], "")
	for name, v := range map[string]string{
		"base64 of the PEM":  b64,
		"the key's body":     body,
		"a broken PEM":       strings.Replace(pemKey, body[:20], "!!!!", 1),
		"a path that is not": "/nonexistent/" + body[:30],
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("LB_TEST_SSH_KEY", v)
			_, err := sshSigner("LB_TEST_SSH_KEY")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, part := range []string{v[:min(len(v), 24)], body[:24], b64[len(b64)-24:]} {
				if strings.Contains(err.Error(), part) {
					t.Errorf("the error shows key material %q: %v", part, err)
				}
			}
		})
	}
	// The forms that work still do.
	path := filepath.Join(t.TempDir(), "key")
	os.WriteFile(path, []byte(pemKey), 0o600)
	for _, v := range []string{pemKey, path} {
		t.Setenv("LB_TEST_SSH_KEY", v)
		if _, err := sshSigner("LB_TEST_SSH_KEY"); err != nil {
			t.Errorf("a good key was refused: %v", err)
		}
	}
}
